# Man pages and shell completions generated from the command's own help, so they cannot drift:
#   cmake -DCOLLSCOPE=build/collscope -DOUT=dir -DVERSION=x.y.z [-DDOCDIR=/usr/share/doc/collscope]
#         -P cmake/CliDocs.cmake
# writes OUT/man1/collscope.1, OUT/man1/collscope-<subcommand>.1 (one per subcommand),
# OUT/bash/collscope and OUT/zsh/_collscope, then OUT/stamp. The subcommands are those
# `collscope --help` lists; their options those `collscope <subcommand> --help` lists (CLI11's
# layout: section headings at column 0, entries at column 2, continuations further in).
# The pages' date is SOURCE_DATE_EPOCH's when set (reproducible builds).
cmake_minimum_required(VERSION 3.25)
foreach(v COLLSCOPE OUT VERSION)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "CliDocs.cmake: -D${v}=... missing")
  endif()
endforeach()
if(NOT DEFINED DOCDIR)
  set(DOCDIR "/usr/share/doc/collscope")
endif()

# _help(OUTVAR args...): the help text, with the program's path in "Usage:" made plain "collscope".
function(_help out)
  execute_process(COMMAND "${COLLSCOPE}" ${ARGN} --help RESULT_VARIABLE rc OUTPUT_VARIABLE text
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR text STREQUAL "")
    message(FATAL_ERROR "CliDocs.cmake: `${COLLSCOPE} ${ARGN} --help` failed (${rc}): ${err}")
  endif()
  string(REGEX REPLACE "Usage: [^ \n]*collscope" "Usage: collscope" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# _lines(OUTVAR text): the text as a CMake list of lines (semicolons kept as \;).
function(_lines out text)
  string(REPLACE "\\" "\\\\" text "${text}")
  string(REPLACE ";" "\\;" text "${text}")
  string(REPLACE "\n" ";" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# _entries(text section names_var descs_var): the names (first field) and one-line descriptions of
# the entries of one section ("Subcommands", "Options", "Positionals").
function(_entries text section names_var descs_var)
  _lines(lines "${text}")
  set(in FALSE)
  set(names "")
  set(descs "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[^ ].*:$")
      if(line STREQUAL "${section}:")
        set(in TRUE)
      else()
        set(in FALSE)
      endif()
    elseif(in AND line MATCHES "^  ([^ ]+)(.*)$")
      set(name "${CMAKE_MATCH_1}")
      set(rest "${CMAKE_MATCH_2}")
      # The description follows the name and its value type after a run of two or more spaces.
      set(desc "")
      if(rest MATCHES "^[^ ]*( [A-Z][A-Z0-9_:.]*| \\.\\.\\.| REQUIRED| \\[[^]]*\\]| x [0-9]+| Excludes: [^ ]+| Needs: [^ ]+)*  +(.*)$")
        set(desc "${CMAKE_MATCH_2}")
      endif()
      string(STRIP "${desc}" desc)
      string(REPLACE ";" "," desc "${desc}")
      list(APPEND names "${name}")
      list(APPEND descs "${desc}")
    endif()
  endforeach()
  set(${names_var} "${names}" PARENT_SCOPE)
  set(${descs_var} "${descs}" PARENT_SCOPE)
endfunction()

# _options(text flags_var valued_var): every option name of the "Options" section, split into flags
# and options that take a value (a value type follows the names: TEXT, INT, FLOAT, ...).
function(_options text flags_var valued_var)
  _lines(lines "${text}")
  set(in FALSE)
  set(flags "")
  set(valued "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^[^ ].*:$")
      if(line STREQUAL "Options:")
        set(in TRUE)
      else()
        set(in FALSE)
      endif()
    elseif(in AND line MATCHES "^  (-[^ ]*)( [^ ]+)?")
      set(names "${CMAKE_MATCH_1}")
      set(next "${CMAKE_MATCH_2}")
      string(REPLACE "," ";" names "${names}")
      foreach(n IN LISTS names)
        string(REGEX REPLACE "{.*$" "" n "${n}")
        if(NOT n MATCHES "^-")
          continue()
        endif()
        if(next MATCHES "^ [A-Z][A-Z0-9_]*([:=].*)?$" AND NOT next STREQUAL " REQUIRED")
          list(APPEND valued "${n}")
        else()
          list(APPEND flags "${n}")
        endif()
      endforeach()
    endif()
  endforeach()
  set(${flags_var} "${flags}" PARENT_SCOPE)
  set(${valued_var} "${valued}" PARENT_SCOPE)
endfunction()

# _roff(OUTVAR text): text for a .nf block: backslashes, hyphens and leading dots escaped.
function(_roff out text)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REPLACE "-" "\\-" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# _squote(OUTVAR text): text inside single quotes for a zsh word of _describe (':' escaped).
function(_squote out text)
  string(REPLACE "'" "'\\''" text "${text}")
  string(REPLACE ":" "\\:" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

string(TIMESTAMP date "%Y-%m-%d" UTC)  # SOURCE_DATE_EPOCH's date when set
file(REMOVE_RECURSE "${OUT}/man1" "${OUT}/bash" "${OUT}/zsh")
file(MAKE_DIRECTORY "${OUT}/man1" "${OUT}/bash" "${OUT}/zsh")

_help(top)
_entries("${top}" "Subcommands" subs sub_descs)
list(LENGTH subs nsubs)
if(nsubs EQUAL 0)
  message(FATAL_ERROR "CliDocs.cmake: `collscope --help` lists no subcommands:\n${top}")
endif()
_options("${top}" top_flags top_valued)
_lines(top_lines "${top}")
list(GET top_lines 0 top_summary)
string(REGEX REPLACE "^collscope: *" "" top_summary "${top_summary}")

# collscope.1
_roff(body "${top}")
_roff(summary "${top_summary}")
set(see "")
foreach(s IN LISTS subs)
  string(APPEND see ".BR collscope\\-${s} (1)\n")
endforeach()
file(WRITE "${OUT}/man1/collscope.1"
".\\\" Generated from `collscope --help` by cmake/CliDocs.cmake: do not edit.
.TH COLLSCOPE 1 \"${date}\" \"collscope ${VERSION}\" \"User Commands\"
.SH NAME
collscope \\- ${summary}
.SH SYNOPSIS
.B collscope
.I subcommand
[\\fIoptions\\fR]
.SH DESCRIPTION
.nf
${body}.fi
.PP
Each subcommand has its own page, and prints the same with
.BR \"collscope \\fIsubcommand\\fR \\-\\-help\" .
The guides are in
.IR ${DOCDIR} .
.SH SEE ALSO
${see}")

# collscope-<subcommand>.1, and the completions' per-subcommand cases.
set(bash_cases "")
set(zsh_cmds "")
set(zsh_cases "")
set(i 0)
foreach(s IN LISTS subs)
  list(GET sub_descs ${i} d)
  math(EXPR i "${i} + 1")
  _help(h ${s})
  _options("${h}" flags valued)
  _roff(body "${h}")
  _roff(summary "${d}")
  file(WRITE "${OUT}/man1/collscope-${s}.1"
".\\\" Generated from `collscope ${s} --help` by cmake/CliDocs.cmake: do not edit.
.TH COLLSCOPE\\-${s} 1 \"${date}\" \"collscope ${VERSION}\" \"User Commands\"
.SH NAME
collscope\\-${s} \\- ${summary}
.SH SYNOPSIS
.B collscope ${s}
[\\fIoptions\\fR]
.SH DESCRIPTION
.nf
${body}.fi
.SH SEE ALSO
.BR collscope (1),
.I ${DOCDIR}
")
  list(JOIN flags " " f)
  list(JOIN valued " " v)
  string(APPEND bash_cases "    ${s}) flags='${f}' valued='${v}' ;;\n")
  _squote(qd "${d}")
  string(APPEND zsh_cmds "    '${s}:${qd}'\n")
  set(specs "")
  foreach(o IN LISTS flags)
    string(APPEND specs " '${o}'")
  endforeach()
  foreach(o IN LISTS valued)
    string(APPEND specs " '${o}:value:_files'")
  endforeach()
  string(APPEND zsh_cases "    ${s}) _arguments -s${specs} '*:file:_files' ;;\n")
endforeach()
list(JOIN subs " " sub_words)
list(APPEND top_flags ${top_valued})
list(JOIN top_flags " " top_words)

file(WRITE "${OUT}/bash/collscope"
"# bash completion for collscope. Generated from `collscope --help` by cmake/CliDocs.cmake.
_collscope() {
  local cur=\${COMP_WORDS[COMP_CWORD]} prev=\${COMP_WORDS[COMP_CWORD-1]} sub='' i flags='' valued=''
  for ((i = 1; i < COMP_CWORD; i++)); do
    case \${COMP_WORDS[i]} in -*) ;; *) sub=\${COMP_WORDS[i]}; break ;; esac
  done
  if [[ -z $sub ]]; then
    if [[ $cur == -* ]]; then
      COMPREPLY=($(compgen -W '${top_words}' -- \"$cur\"))
    else
      COMPREPLY=($(compgen -W '${sub_words}' -- \"$cur\"))
    fi
    return 0
  fi
  case $sub in
${bash_cases}    *) return 0 ;;
  esac
  # After an option that takes a value, and for positional arguments: files (complete -o default).
  local o
  for o in $valued; do [[ $prev == \"$o\" ]] && return 0; done
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W \"$flags $valued\" -- \"$cur\"))
  fi
  return 0
}
complete -o default -F _collscope collscope
")

set(zsh_top "")
foreach(o IN LISTS top_flags)
  string(APPEND zsh_top " '${o}'")
endforeach()
file(WRITE "${OUT}/zsh/_collscope"
"#compdef collscope
# zsh completion for collscope. Generated from `collscope --help` by cmake/CliDocs.cmake.
_collscope() {
  local -a subcommands
  subcommands=(
${zsh_cmds}  )
  if (( CURRENT == 2 )); then
    if [[ \${words[CURRENT]} == -* ]]; then
      _arguments${zsh_top}
    else
      _describe -t commands 'collscope subcommand' subcommands
    fi
    return
  fi
  local sub=\${words[2]}
  shift words
  (( CURRENT-- ))
  case $sub in
${zsh_cases}    *) _files ;;
  esac
}
_collscope \"$@\"
")
file(WRITE "${OUT}/subcommands.txt" "${sub_words}\n")
file(WRITE "${OUT}/stamp" "")
