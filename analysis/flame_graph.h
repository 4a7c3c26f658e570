// Flame graphs of sampled call stacks (core/stack_profile.h) as static HTML: an icicle (root on
// top, callees below their callers) of nested blocks whose widths are proportional to sample
// counts, drawn by CSS alone (analysis/report_assets/report.css, the `fg-` classes), so that it
// reads without JavaScript. Each box's `title` holds the full frame, its samples and its share.
//
// Bounded whatever the input: a frame narrower than `min_share` of the samples, deeper than
// `max_depth`, or past the `max_boxes` widest boxes is not drawn (its samples stay in its
// caller's width, as self time), and a note says how many were left out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/stack_profile.h"

namespace collscope {

// One frame of the merged call tree: the samples of every stack that passes through it.
struct FlameNode {
  std::string frame;  // "" for the root
  int64_t count = 0;
  std::vector<FlameNode> children;  // by frame text
};

// Merges folded stacks ("root;...;leaf", with counts) into one tree rooted at an unnamed node
// holding every sample. Stacks with a count <= 0 are passed by; a stack deeper than max_depth
// frames is cut there (its samples stay in its max_depth-th frame), and *cut says how many were.
FlameNode FlameTreeOf(const std::vector<FoldedStack>& stacks, size_t max_depth = 512,
                      size_t* cut = nullptr);

// Python frames are written "function (file.py:line)"; anything else is a native frame.
bool IsPythonFrame(const std::string& frame);

inline constexpr size_t kFlameMaxBoxes = 2000;

struct FlameGraphOptions {
  size_t max_boxes = kFlameMaxBoxes;  // boxes drawn, the root's included; the widest are kept
  double min_share = 0.005;           // of all samples: narrower frames are not drawn
  size_t max_depth = 64;              // frames below the root
  std::string root_label = "all";     // the root box's text
};

// `<div class="flame" ...>` with the boxes, and a note when frames were left out; "" when the
// stacks hold no samples.
std::string FlameGraphHtml(const std::vector<FoldedStack>& stacks,
                           const FlameGraphOptions& options);
std::string FlameGraphHtml(const std::vector<FoldedStack>& stacks,
                           size_t max_boxes = kFlameMaxBoxes);

}  // namespace collscope
