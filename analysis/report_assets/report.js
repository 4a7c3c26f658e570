// collscope report: renders the aggregated tables embedded in #report-data with ECharts.
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('report-data').textContent);
  var F = JSON.parse(document.getElementById('findings-data').textContent);
  var charts = [];
  var PALETTE = ['#2f6fde', '#e8743b', '#2e9e6a', '#b553c9', '#d64545', '#19a0aa', '#8a6d3b', '#5a6b8c'];

  function rows(t) {  // table -> array of objects
    if (!t) return [];
    return t.rows.map(function (r) { var o = {}; t.columns.forEach(function (c, i) { o[c] = r[i]; }); return o; });
  }
  function el(tag, attrs, html) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (html !== undefined) e.innerHTML = html;
    return e;
  }
  function esc(s) { return String(s === null || s === undefined ? '' : s).replace(/[&<>"]/g, function (c) { return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]; }); }
  function bytes(b) { if (b === null || b === undefined) return ''; var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']; var i = 0; b = Number(b); while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; } return (i ? b.toFixed(1) : b.toFixed(0)) + ' ' + u[i]; }
  function num(x, d) { if (x === null || x === undefined) return ''; return Number(x).toLocaleString('en-US', {maximumFractionDigits: d === undefined ? 2 : d}); }
  function pct(x) { return x === null || x === undefined ? '' : (100 * x).toFixed(1) + '%'; }
  function dur(us) { var s = us / 1e6; if (s < 120) return s.toFixed(1) + ' s'; if (s < 7200) return (s / 60).toFixed(1) + ' min'; return (s / 3600).toFixed(2) + ' h'; }
  function shortKey(k) { return String(k).replace('nvlink-only', 'NVLink').replace('nic-only', 'NIC').replace('mixed', 'mixed'); }
  function sizeOf(k) { var p = String(k).split('/'); return p.length > 3 ? p.slice(0, 3).join('/') + '/' + bytes(Number(p[3])) : k; }
  function normPill(v) { if (v === null || v === undefined) return ''; var c = v < 0.85 ? 'bad' : v < 0.95 ? 'warn' : 'good'; return '<span class="pill ' + c + '">' + v.toFixed(3) + '</span>'; }
  function table(container, cols, data, opts) {
    opts = opts || {};
    var t = el('table', {class: 't'});
    var h = '<thead><tr>' + cols.map(function (c) { return '<th>' + esc(c.title) + '</th>'; }).join('') + '</tr></thead><tbody>';
    data.forEach(function (r) {
      h += '<tr' + (opts.highlight && opts.highlight(r) ? ' class="hl"' : '') + '>' + cols.map(function (c) {
        var v = c.render ? c.render(r) : esc(r[c.key]);
        return '<td' + (c.num ? ' class="num"' : '') + '>' + v + '</td>';
      }).join('') + '</tr>';
    });
    t.innerHTML = h + '</tbody>';
    container.appendChild(t);
    return t;
  }
  function chart(id, option) {
    var node = document.getElementById(id);
    if (!node) throw new Error('missing chart container ' + id);
    if (!window.echarts) { node.innerHTML = '<div class="empty">Charting library not built in.</div>'; return null; }
    var c = echarts.init(node, null, {renderer: 'canvas'});
    option.animation = false;
    option.color = option.color || PALETTE;
    option.textStyle = {fontFamily: 'inherit'};
    c.setOption(option);
    node.setAttribute('data-chart', 'ok');
    charts.push(c);
    return c;
  }
  function empty(id, text) { var n = document.getElementById(id); n.innerHTML = '<div class="empty">' + esc(text) + '</div>'; n.setAttribute('data-chart', 'empty'); n.style.height = 'auto'; }
  var zoomXY = [{type: 'inside', xAxisIndex: 0}, {type: 'slider', xAxisIndex: 0, height: 18, bottom: 6}];
  var tip = {trigger: 'axis', confine: true};

  // ---- overview ----
  var ov = rows(D.overview)[0] || {};
  document.getElementById('subtitle').textContent = (ov.first_dump_text ? ov.first_dump_text + ' \u2013 ' + ov.last_dump_text + '  \u00b7  ' : '') + 'store ' + D.meta.store;
  var spanUs = ov.first_dump_text ? (Date.parse(ov.last_dump_text.replace(' ', 'T') + 'Z') - Date.parse(ov.first_dump_text.replace(' ', 'T') + 'Z')) * 1000 : 0;
  var cards = [['Records', num(ov.records, 0)], ['Hosts', num(ov.hosts, 0)], ['Processes (GPUs)', num(ov.processes, 0)], ['Communicators', num(ov.communicators, 0)],
    ['Largest communicator', num(ov.max_n_ranks, 0) + ' ranks'], ['Kernels', num(ov.kernels, 0)], ['Bytes moved', bytes(ov.bytes)], ['Time in collectives', dur(ov.time_us || 0)],
    ['Span of records', spanUs > 0 ? dur(spanUs) : 'n/a'], ['Rejected lines', num(ov.rejected_lines, 0)]];
  var cc = document.getElementById('overview-cards');
  cards.forEach(function (c) { cc.appendChild(el('div', {class: 'card'}, '<div class="v">' + esc(c[1]) + '</div><div class="k">' + esc(c[0]) + '</div>')); });
  function pie(id, t, key) {
    var data = rows(t).map(function (r) { return {name: String(r[key]), value: r.time_us}; });
    if (!data.length) return empty(id, 'No records.');
    chart(id, {tooltip: {trigger: 'item', formatter: function (p) { return esc(p.name) + ': ' + p.percent + '% of time'; }},
      legend: {orient: 'vertical', right: 10, top: 'middle'},
      series: [{type: 'pie', radius: ['45%', '72%'], center: ['38%', '50%'], data: data, label: {show: false}}]});
  }
  pie('chart-ops', D.counts_by_op, 'op');
  pie('chart-classes', D.counts_by_coll_type, 'coll_type');

  // ---- findings: rendered into the page by collscope (cards, host table); here their windows
  // shade the time charts and the hosts they name stand out in the heatmaps ----
  var BANDS = D.bands || [];
  var NAMED = D.named_hosts || {culprits: [], suspects: []};
  var culprit = {}, suspect = {};
  NAMED.culprits.forEach(function (h) { culprit[h] = true; });
  NAMED.suspects.forEach(function (h) { suspect[h] = true; });
  function bandColor(b) { return b.symptom ? 'rgba(232,163,61,0.16)' : 'rgba(214,69,69,0.14)'; }
  // markArea of the findings' windows on a time axis (milliseconds).
  function timeBands() {
    return {silent: true, label: {show: true, position: 'insideTopLeft', color: '#8a2d2d', fontSize: 11},
      data: BANDS.map(function (b) { return [{name: b.label, xAxis: b.start_us / 1000, itemStyle: {color: bandColor(b)}}, {xAxis: b.end_us / 1000}]; })};
  }
  // The same on a category axis of time bins (bin starts in us, sorted, each binUs wide).
  function binBands(bins, binUs) {
    var data = [];
    BANDS.forEach(function (b) {
      var first = -1, last = -1;
      bins.forEach(function (s, i) { if (s < b.end_us && s + binUs > b.start_us) { if (first < 0) first = i; last = i; } });
      if (first >= 0) data.push([{name: b.label, xAxis: first, itemStyle: {color: 'rgba(0,0,0,0)', borderColor: b.symptom ? '#e8a33d' : '#d64545', borderWidth: 2, borderType: 'dashed'}}, {xAxis: last}]);
    });
    return {silent: true, label: {show: true, position: 'insideTop', color: '#8a2d2d', fontSize: 11}, data: data};
  }
  function markBands(id, n) { var node = document.getElementById(id); if (node) node.setAttribute('data-bands', String(n)); }
  // The longest domain (".cluster.internal") every one of several names ends with, leaving each a
  // name of its own; '' when there is none.
  function sharedDomain(names) {
    if (names.length < 2) return '';
    var first = names[0];
    for (var i = first.indexOf('.'); i > 0; i = first.indexOf('.', i + 1)) {
      var d = first.slice(i);
      if (names.every(function (n) { return n.length > d.length && n.slice(n.length - d.length) === d; })) return d;
    }
    return '';
  }

  // ---- each culprit card's mini chart: its communicators against their siblings over time, the
  // finding's window shaded (culprit_series in analysis/views.cc) ----
  (D.card_series || []).forEach(function (cs) {
    var id = 'card-chart-' + cs.card, mine = [], peers = [];
    cs.rows.forEach(function (r) { (r[1] ? mine : peers).push([r[0] / 1000, r[2], r[3]]); });
    var band = cs.end_us > cs.start_us ? [[{xAxis: cs.start_us / 1000, itemStyle: {color: 'rgba(214,69,69,0.14)'}}, {xAxis: cs.end_us / 1000}]] : [];
    function line(name, data, color) {
      return {name: name, type: 'line', showSymbol: false, data: data, lineStyle: {color: color, width: 2}, itemStyle: {color: color}};
    }
    var s0 = line('culprit\u2019s communicators', mine, '#d64545');
    s0.markArea = {silent: true, data: band};
    chart(id, {tooltip: {trigger: 'axis', confine: true, valueFormatter: function (v) { return num(v, 2) + '\u00d7 usual'; }},
      legend: {top: 0, right: 0, textStyle: {fontSize: 11}}, grid: {left: 44, right: 12, top: 24, bottom: 24},
      xAxis: {type: 'time', axisLabel: {fontSize: 10, hideOverlap: true}},
      yAxis: {type: 'value', name: '\u00d7 usual', nameTextStyle: {fontSize: 10}, axisLabel: {fontSize: 10}, scale: true},
      series: [s0, line('siblings', peers, '#8c8c8c')]});
    markBands(id, band.length);
  });

  // ---- hot kernels ----
  var hot = rows(D.hot_kernels);
  var maxShare = Math.max.apply(null, hot.map(function (r) { return r.time_share || 0; }).concat([1e-9]));
  table(document.getElementById('hot-table'), [
    {title: '#', key: 'rank', num: true}, {title: 'kernel', render: function (r) { return esc(r.coll_type) + ' / ' + r.n_ranks + ' ranks on ' + r.nnodes + ' node' + (r.nnodes > 1 ? 's' : '') + ' / <b>' + esc(r.op) + '</b> / ' + bytes(r.msg_size_bytes); }},
    {title: 'records', num: true, render: function (r) { return num(r.records, 0); }}, {title: 'bytes', num: true, render: function (r) { return bytes(r.bytes); }},
    {title: 'time share', render: function (r) { return '<span class="bar" style="width:' + (80 * r.time_share / maxShare).toFixed(1) + 'px"></span>' + pct(r.time_share); }},
    {title: 'cumulative', num: true, render: function (r) { return pct(r.cumulative_time_share); }}, {title: 'bytes share', num: true, render: function (r) { return pct(r.bytes_share); }},
    {title: 'median busbw', num: true, render: function (r) { return num(r.median_busbw_gbs) + ' GB/s'; }}, {title: 'p5 \u2013 p95', num: true, render: function (r) { return num(r.p5_busbw_gbs) + ' \u2013 ' + num(r.p95_busbw_gbs); }},
    {title: 'CV', num: true, render: function (r) { return r.cv_busbw === null ? '' : (100 * r.cv_busbw).toFixed(1) + '%'; }}], hot);

  // ---- ECDF ----
  var ecdf = rows(D.ecdf), byKernel = {};
  ecdf.forEach(function (r) { (byKernel[r.kernel_key] = byKernel[r.kernel_key] || []).push([r.busbw_gbs, r.ecdf]); });
  var keys = hot.map(function (r) { return r.kernel_key; }).filter(function (k) { return byKernel[k]; });
  if (!keys.length) empty('chart-ecdf', 'No bandwidth values.');
  else chart('chart-ecdf', {tooltip: {trigger: 'item', confine: true, formatter: function (p) { return esc(sizeOf(p.seriesName)) + '<br>busbw ' + num(p.value[0]) + ' GB/s<br>' + pct(p.value[1]) + ' of records at or below'; }},
    legend: {type: 'scroll', top: 0, formatter: sizeOf}, grid: {left: 60, right: 30, top: 40, bottom: 60},
    xAxis: {type: 'log', name: 'busbw (GB/s)', nameLocation: 'middle', nameGap: 28, min: function (v) { return Math.pow(10, Math.floor(Math.log10(Math.max(v.min, 1e-6)))); }},
    yAxis: {type: 'value', min: 0, max: 1, name: 'fraction of records'},
    dataZoom: zoomXY,
    series: keys.map(function (k) { return {name: k, type: 'line', step: 'end', showSymbol: false, data: byKernel[k].filter(function (p) { return p[0] > 0; })}; })});

  // ---- temporal ----
  var tem = rows(D.temporal), tk = {};
  tem.forEach(function (r) { (tk[r.kernel_key] = tk[r.kernel_key] || []).push(r); });
  var tkeys = Object.keys(tk);
  document.getElementById('temporal-note').textContent = 'Mean per ' + num(D.meta.bin_s, 3) + ' s bin (band: min\u2013max), messages of at least ' + bytes(D.meta.min_bytes) + '. Drag the slider or scroll to zoom.';
  if (!tkeys.length) { empty('chart-temporal-bw', 'No messages of at least ' + bytes(D.meta.min_bytes) + '.'); empty('chart-temporal-exec', 'No data.'); }
  else {
    var ts = function (r) { return r.bin_start_us / 1000; };
    chart('chart-temporal-bw', {tooltip: tip, legend: {type: 'scroll', top: 0, formatter: sizeOf}, grid: {left: 60, right: 30, top: 40, bottom: 60},
      xAxis: {type: 'time'}, yAxis: {type: 'value', name: 'busbw (GB/s)'}, dataZoom: zoomXY,
      series: tkeys.map(function (k, i) { return {name: k, type: 'line', showSymbol: false, markArea: i === 0 && BANDS.length ? timeBands() : undefined, data: tk[k].map(function (r) { return [ts(r), r.mean_busbw_gbs]; })}; })});
    markBands('chart-temporal-bw', BANDS.length);
    chart('chart-temporal-exec', {tooltip: tip, legend: {type: 'scroll', top: 0, formatter: sizeOf}, grid: {left: 60, right: 30, top: 40, bottom: 60},
      xAxis: {type: 'time'}, yAxis: {type: 'log', name: 'mean exec time (\u00b5s)'}, dataZoom: zoomXY,
      series: tkeys.map(function (k, i) { return {name: k, type: 'line', showSymbol: false, markArea: i === 0 && BANDS.length ? timeBands() : undefined, data: tk[k].map(function (r) { return [ts(r), Math.max(r.mean_exec_time_us, 1)]; })}; })});
    markBands('chart-temporal-exec', BANDS.length);
  }

  // ---- spatial ----
  var ht = rows(D.host_table);
  var hh = rows(D.host_heatmap);
  if (!hh.length) empty('chart-host-heatmap', 'No data.');
  else {
    // Culprits on top, then suspects, then the rest worst first (the host table's order).
    var rankOf = function (h) { return culprit[h] ? 0 : suspect[h] ? 1 : 2; };
    var hosts = ht.map(function (r, i) { return [rankOf(r.hostname), i, r.hostname]; }).sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; })
      .map(function (x) { return x[2]; }).reverse();
    var hostIx = {}; hosts.forEach(function (h, i) { hostIx[h] = i; });
    // The axis shows what tells the hosts apart: a domain they all share (".cluster.internal")
    // would fill the labels and truncate them to it.
    var domain = sharedDomain(hosts);
    var shortHost = function (h) { return domain ? h.slice(0, h.length - domain.length) : h; };
    if (domain) document.getElementById('host-heatmap-note').textContent = 'Hosts without their shared domain, ' + domain + '.';
    var bins = Array.from(new Set(hh.map(function (r) { return r.bin_start_us; }))).sort(function (a, b) { return a - b; });
    var binIx = {}; bins.forEach(function (b, i) { binIx[b] = i; });
    var cells = hh.filter(function (r) { return hostIx[r.hostname] !== undefined; }).map(function (r) { return [binIx[r.bin_start_us], hostIx[r.hostname], Number(r.norm_busbw.toFixed(4)), r.records]; });
    var t0 = bins[0];
    chart('chart-host-heatmap', {tooltip: {confine: true, formatter: function (p) { return esc(hosts[p.value[1]]) + '<br>t = +' + ((bins[p.value[0]] - t0) / 1e6).toFixed(2) + ' s<br>normalised busbw ' + p.value[2] + '<br>' + p.value[3] + ' records'; }},
      grid: {left: 90, right: 70, top: 10, bottom: 70},
      xAxis: {type: 'category', data: bins.map(function (b) { return '+' + ((b - t0) / 1e6).toFixed(1) + ' s'; }), splitArea: {show: false}},
      yAxis: {type: 'category', data: hosts, axisLabel: {hideOverlap: true,
        formatter: function (h) { var s = shortHost(h); return culprit[h] ? '{c|\u25b6 ' + s + '}' : suspect[h] ? '{s|' + s + '}' : s; },
        rich: {c: {color: '#d64545', fontWeight: 'bold'}, s: {color: '#a86b0c', fontWeight: 'bold'}}}},
      visualMap: {dimension: 2, min: 0.5, max: 1.1, calculable: true, orient: 'vertical', right: 5, top: 'middle', precision: 2, inRange: {color: ['#b2182b', '#ef8a62', '#fddbc7', '#f7f7f7', '#d1e5f0', '#67a9cf']}},
      dataZoom: [{type: 'inside', xAxisIndex: 0}, {type: 'inside', yAxisIndex: 0}, {type: 'slider', xAxisIndex: 0, height: 18, bottom: 8}],
      series: [{type: 'heatmap', data: cells, progressive: 20000, markArea: BANDS.length ? binBands(bins, D.meta.bin_s * 1e6) : undefined}]});
    markBands('chart-host-heatmap', BANDS.length);
    document.getElementById('chart-host-heatmap').setAttribute('data-culprits', hosts.filter(function (h) { return culprit[h]; }).join(' '));
  }
  // A row per communicator kind, a column per process (host, pid order): every rank of a job of
  // thousands in one view, each cell against the median process of its own kind, so that a kind's
  // own speed stays neutral. The culprit hosts' processes are framed.
  var kc = rows(D.kind_rank_cells);
  if (!kc.length) empty('chart-kind-heatmap', 'No messages of at least ' + bytes(D.meta.min_bytes) + '.');
  else {
    var kinds = [], kindRow = {}, nproc = 0, kcells = [], procHost = {};
    kc.forEach(function (r) {
      if (kindRow[r.comm_kind] === undefined) { kindRow[r.comm_kind] = kinds.length; kinds.push(r.comm_kind); }
      nproc = Math.max(nproc, r.ordinal + 1);
      procHost[r.ordinal] = r.hostname;
      kcells.push([r.ordinal, kindRow[r.comm_kind], Number(r.norm_busbw.toFixed(4)), r.hostname, r.records, r.pid]);
    });
    // Runs of consecutive processes on culprit hosts (ordinals follow host order), each framed.
    var framed = [], run = null, framedProcs = 0;
    for (var q = 0; q < nproc; q++) {
      if (!culprit[procHost[q]]) { run = null; continue; }
      framedProcs++;
      if (run) run[1].xAxis = String(q);
      else { run = [{xAxis: String(q)}, {xAxis: String(q)}]; framed.push(run); }
    }
    document.getElementById('kind-heatmap-note').textContent = nproc + ' processes in host order, ' + kinds.length +
      (kinds.length === 1 ? ' communicator kind' : ' communicator kinds') + '; each cell is the process\u2019s busbw over the median process of its kind for the same message size' +
      (framed.length ? '; the culprit hosts\u2019 processes are framed in red.' : '.');
    chart('chart-kind-heatmap', {tooltip: {confine: true, formatter: function (p) { return esc(kinds[p.value[1]]) + '<br>process ' + p.value[0] + ' (pid ' + p.value[5] + ' on ' + esc(p.value[3]) + ')<br>normalised busbw ' + p.value[2] + '<br>' + p.value[4] + ' records'; }},
      grid: {left: 230, right: 70, top: 10, bottom: 70},
      xAxis: {type: 'category', name: 'process (host order)', nameLocation: 'middle', nameGap: 50, data: Array.from({length: nproc}, function (_, i) { return String(i); })},
      yAxis: {type: 'category', data: kinds, axisLabel: {width: 210, overflow: 'truncate'}},
      visualMap: {dimension: 2, min: 0.5, max: 1.1, calculable: true, orient: 'vertical', right: 5, top: 'middle', precision: 2, inRange: {color: ['#b2182b', '#ef8a62', '#fddbc7', '#f7f7f7', '#d1e5f0', '#67a9cf']}},
      dataZoom: [{type: 'inside', xAxisIndex: 0}, {type: 'slider', xAxisIndex: 0, height: 18, bottom: 8}],
      series: [{type: 'heatmap', data: kcells, progressive: 20000,
        markArea: framed.length ? {silent: true, itemStyle: {color: 'rgba(0,0,0,0)', borderColor: '#d64545', borderWidth: 2}, data: framed} : undefined}]});
    var kindNode = document.getElementById('chart-kind-heatmap');
    kindNode.setAttribute('data-kinds', String(kinds.length));
    kindNode.setAttribute('data-processes', String(nproc));
    kindNode.setAttribute('data-culprit-processes', String(framedProcs));
  }

  var rc = rows(D.rank_cells);
  if (!rc.length) empty('chart-rank-heatmap', 'No messages of at least ' + bytes(D.meta.min_bytes) + '.');
  else {
    // A row per communicator. A large job has hundreds, too many to read: the rows shown are
    // MAX_COMM_ROWS of them, those with a member on a culprit host first, then those whose slowest
    // member is slowest, on top; the note says what the others hold.
    var MAX_COMM_ROWS = 40;
    var byComm = {}, commList = [];
    rc.forEach(function (r) {
      var c = byComm[r.comm_id];
      if (!c) { c = byComm[r.comm_id] = {id: r.comm, name: r.comm_name, min: Infinity, cells: [], hosts: {}, culprit: false}; commList.push(c); }
      c.min = Math.min(c.min, r.norm_busbw);
      c.cells.push(r);
      c.hosts[r.hostname] = true;
      if (culprit[r.hostname]) c.culprit = true;
    });
    commList.sort(function (a, b) { return (b.culprit ? 1 : 0) - (a.culprit ? 1 : 0) || a.min - b.min; });
    var shownComms = commList.slice(0, MAX_COMM_ROWS);
    // Named as the job names it, else by its shape (Inspector writes "unknown" where NCCL had no name).
    var commRowLabel = function (c) {
      var nh = Object.keys(c.hosts).length;
      var name = c.name && c.name !== 'unknown' ? c.name : c.cells.length + '-rank group on ' + nh + (nh === 1 ? ' host' : ' hosts');
      return name + ' ' + c.id;
    };
    var comms = shownComms.map(commRowLabel).reverse(), maxRank = 0, rcells = [];
    shownComms.forEach(function (c, i) {
      c.cells.forEach(function (r) { maxRank = Math.max(maxRank, r.rank); rcells.push([r.rank, comms.length - 1 - i, Number(r.norm_busbw.toFixed(4)), r.hostname, r.records]); });
    });
    var rest = commList.slice(MAX_COMM_ROWS);
    var restLo = rest.reduce(function (m, c) { return Math.min(m, c.min); }, Infinity);
    var restHi = rest.reduce(function (m, c) { return Math.max(m, c.min); }, -Infinity);
    var order = 'those with a member on a culprit host (\u25b6) first, then by their slowest member, slowest on top';
    document.getElementById('rank-heatmap-note').textContent = rest.length
      ? shownComms.length + ' of ' + commList.length + ' communicators, ' + order + '. The other ' + rest.length +
        ' are left out; their slowest members run at ' + num(restLo, 2) + ' to ' + num(restHi, 2) +
        ' of their kernel\u2019s median.'
      : 'Every communicator, ' + order + '.';
    var culpritComm = {};
    shownComms.forEach(function (c) { if (c.culprit) culpritComm[commRowLabel(c)] = true; });
    chart('chart-rank-heatmap', {tooltip: {confine: true, formatter: function (p) { return esc(comms[p.value[1]]) + '<br>rank ' + p.value[0] + ' on ' + esc(p.value[3]) + '<br>normalised busbw ' + p.value[2] + '<br>' + p.value[4] + ' records'; }},
      grid: {left: 230, right: 70, top: 10, bottom: 70},
      xAxis: {type: 'category', name: 'rank in communicator', nameLocation: 'middle', nameGap: 50, data: Array.from({length: maxRank + 1}, function (_, i) { return i; })},
      yAxis: {type: 'category', data: comms, axisLabel: {width: 210, overflow: 'truncate',
        formatter: function (l) { return culpritComm[l] ? '{c|\u25b6 ' + l + '}' : l; }, rich: {c: {color: '#d64545', fontWeight: 'bold'}}}},
      visualMap: {dimension: 2, min: 0.5, max: 1.1, calculable: true, orient: 'vertical', right: 5, top: 'middle', precision: 2, inRange: {color: ['#b2182b', '#ef8a62', '#fddbc7', '#f7f7f7', '#d1e5f0', '#67a9cf']}},
      dataZoom: [{type: 'inside', xAxisIndex: 0}, {type: 'inside', yAxisIndex: 0}, {type: 'slider', xAxisIndex: 0, height: 18, bottom: 8}],
      series: [{type: 'heatmap', data: rcells, progressive: 20000}]});
    var rankNode = document.getElementById('chart-rank-heatmap');
    rankNode.setAttribute('data-rows', String(shownComms.length));
    rankNode.setAttribute('data-comms', String(commList.length));
    rankNode.setAttribute('data-culprit-rows', String(shownComms.filter(function (c) { return c.culprit; }).length));
    rankNode.setAttribute('data-culprit-comms', String(commList.filter(function (c) { return c.culprit; }).length));
  }

  // ---- steps and phases (step_cells, phase_means, parallel_grid in analysis/views.cc) ----
  var culpritRank = {};
  (NAMED.culprit_ranks || []).forEach(function (r) { culpritRank[r] = true; });
  // A rank is the culprit's when a culprit finding names it, or names its host and none of the
  // host's ranks (a slow GPU's finding names its host too; a NIC's, every rank of the host). A
  // host's row holds its worst rank at each step.
  var rankNamedOn = {};
  rows(D.step_cells).concat(rows(D.parallel_grid), rows(D.kernel_mode_cells)).forEach(function (r) { if (culpritRank[r.rank]) rankNamedOn[r.hostname] = true; });
  function culpritRow(r) { return culpritRank[r.rank] || culprit[r.hostname] && !rankNamedOn[r.hostname]; }
  var RATIO = {min: 0.8, max: 1.25, inRange: {color: ['#67a9cf', '#d1e5f0', '#f7f7f7', '#fddbc7', '#ef8a62', '#b2182b']}};
  function rowLabels(isCulprit) {
    return {hideOverlap: true, formatter: function (l) { return isCulprit[l] ? '{c|\u25b6 ' + l + '}' : l; }, rich: {c: {color: '#d64545', fontWeight: 'bold'}}};
  }
  var noSteps = 'No step/phase series or Kineto steps in this run: the collscope-annotate API (docs/annotate.md) writes them.';
  var sc = rows(D.step_cells);
  if (!sc.length) empty('chart-step-heatmap', noSteps);
  else {
    var srows = [], srowIx = {}, sCulprit = {}, stepStart = {};
    sc.forEach(function (r) {
      if (srowIx[r.row_label] === undefined) { srowIx[r.row_label] = srows.length; srows.push(r.row_label); }
      if (culpritRow(r)) sCulprit[r.row_label] = true;
      if (stepStart[r.step] === undefined || r.start_us < stepStart[r.step]) stepStart[r.step] = r.start_us;
    });
    var steps = Object.keys(stepStart).map(Number).sort(function (a, b) { return a - b; });
    var stepIx = {}; steps.forEach(function (x, i) { stepIx[x] = i; });
    var ylab = srows.slice().reverse(), yIx = {}; ylab.forEach(function (l, i) { yIx[l] = i; });
    var scells = sc.filter(function (r) { return r.ratio !== null; }).map(function (r) { return [stepIx[r.step], yIx[r.row_label], r.ratio, r.compute_us, r.step_us, r.rank, r.hostname, r.ranks]; });
    // The findings' windows as the steps they overlap (a step runs from its start to the next's).
    var stepBands = {silent: true, label: {show: true, position: 'insideTop', color: '#8a2d2d', fontSize: 11}, data: []};
    BANDS.forEach(function (b) {
      var first = -1, last = -1;
      steps.forEach(function (x, i) {
        var end = i + 1 < steps.length ? stepStart[steps[i + 1]] : Infinity;
        if (stepStart[x] < b.end_us && end > b.start_us) { if (first < 0) first = i; last = i; }
      });
      if (first >= 0) stepBands.data.push([{name: b.label, xAxis: first, itemStyle: {color: 'rgba(0,0,0,0)', borderColor: b.symptom ? '#e8a33d' : '#d64545', borderWidth: 2, borderType: 'dashed'}}, {xAxis: last}]);
    });
    chart('chart-step-heatmap', {tooltip: {confine: true, formatter: function (p) { var v = p.value; return esc(ylab[v[1]]) + (v[7] > 1 ? ' (worst: rank ' + v[5] + ')' : ' on ' + esc(v[6])) + '<br>step ' + steps[v[0]] + '<br>compute ' + num(v[3] / 1000, 1) + ' ms, ' + v[2] + '\u00d7 its peers<br>step ' + num(v[4] / 1000, 1) + ' ms'; }},
      grid: {left: 120, right: 70, top: 10, bottom: 70},
      xAxis: {type: 'category', name: 'step', nameLocation: 'middle', nameGap: 50, data: steps.map(String)},
      yAxis: {type: 'category', data: ylab, axisLabel: rowLabels(sCulprit)},
      visualMap: Object.assign({dimension: 2, calculable: true, orient: 'vertical', right: 5, top: 'middle', precision: 2}, RATIO),
      dataZoom: [{type: 'inside', xAxisIndex: 0}, {type: 'inside', yAxisIndex: 0}, {type: 'slider', xAxisIndex: 0, height: 18, bottom: 8}],
      series: [{type: 'heatmap', data: scells, progressive: 20000, markArea: stepBands.data.length ? stepBands : undefined}]});
    markBands('chart-step-heatmap', stepBands.data.length);
    document.getElementById('chart-step-heatmap').setAttribute('data-culprits', srows.filter(function (l) { return sCulprit[l]; }).join(' '));
  }
  var pm = rows(D.phase_means);
  if (!pm.length) empty('chart-phases', noSteps);
  else {
    var prows = [], prowIx = {}, pCulprit = {}, phases = [], phaseComm = {};
    pm.forEach(function (r) {
      if (prowIx[r.row_label] === undefined) { prowIx[r.row_label] = prows.length; prows.push(r.row_label); }
      if (/^rank /.test(r.row_label) ? culpritRow({rank: r.first_rank, hostname: r.hostname}) : culprit[r.hostname] || rankNamedOn[r.hostname]) pCulprit[r.row_label] = true;
      if (phaseComm[r.phase] === undefined) { phases.push(r.phase); phaseComm[r.phase] = r.communication === true || r.communication === 'true'; }
    });
    // What a rank computes first, then what it waits in.
    phases.sort(function (a, b) { return (phaseComm[a] ? 1 : 0) - (phaseComm[b] ? 1 : 0) || (a < b ? -1 : a > b ? 1 : 0); });
    var series = phases.map(function (ph) {
      var data = prows.map(function () { return 0; });
      pm.forEach(function (r) { if (r.phase === ph) data[prowIx[r.row_label]] = r.mean_us / 1000; });
      return {name: ph + (phaseComm[ph] ? ' (comm)' : ''), type: 'bar', stack: 'phases', data: data, large: true,
        itemStyle: phaseComm[ph] ? {opacity: 0.55} : undefined};
    });
    chart('chart-phases', {tooltip: {trigger: 'axis', confine: true, axisPointer: {type: 'shadow'}, valueFormatter: function (v) { return num(v, 1) + ' ms'; }},
      legend: {type: 'scroll', top: 0}, grid: {left: 60, right: 20, top: 40, bottom: 70},
      xAxis: {type: 'category', data: prows, axisLabel: rowLabels(pCulprit)},
      yAxis: {type: 'value', name: 'ms per step'}, dataZoom: zoomXY, series: series});
    document.getElementById('chart-phases').setAttribute('data-culprits', prows.filter(function (l) { return pCulprit[l]; }).join(' '));
  }
  var pg = rows(D.parallel_grid);
  if (!pg.length) empty('chart-parallel-grid', sc.length ? 'The step series declare no parallel layout (their data-, tensor- and pipeline-parallel ranks).' : noSteps);
  else {
    var dps = Array.from(new Set(pg.map(function (r) { return r.dp_rank; }))).sort(function (a, b) { return a - b; });
    var ykey = function (r) { return 'PP ' + r.pp_rank + ' \u00b7 TP ' + r.tp_rank; };
    var ys = [], yseen = {};
    pg.forEach(function (r) { var k = ykey(r); if (!yseen[k]) { yseen[k] = true; ys.push(k); } });
    ys.reverse();
    var gy = {}; ys.forEach(function (k, i) { gy[k] = i; });
    var gx = {}; dps.forEach(function (x, i) { gx[x] = i; });
    var gcells = pg.filter(function (r) { return r.ratio !== null; }).map(function (r) {
      var cell = {value: [gx[r.dp_rank], gy[ykey(r)], r.ratio, r.rank, r.hostname, r.max_compute_us]};
      if (culpritRow(r)) cell.itemStyle = {borderColor: '#d64545', borderWidth: 2};
      return cell;
    });
    chart('chart-parallel-grid', {tooltip: {confine: true, formatter: function (p) { var v = p.value; return 'rank ' + v[3] + ' on ' + esc(v[4]) + '<br>' + esc(ys[v[1]]) + ' \u00b7 DP ' + dps[v[0]] + '<br>longest compute time ' + num(v[5] / 1000, 1) + ' ms, ' + v[2] + '\u00d7 its stage'; }},
      grid: {left: 110, right: 70, top: 10, bottom: 60},
      xAxis: {type: 'category', name: 'data-parallel rank', nameLocation: 'middle', nameGap: 40, data: dps.map(String), axisLabel: {hideOverlap: true}},
      yAxis: {type: 'category', data: ys, axisLabel: {hideOverlap: true}},
      visualMap: Object.assign({dimension: 2, calculable: true, orient: 'vertical', right: 5, top: 'middle', precision: 2}, RATIO),
      dataZoom: [{type: 'inside', xAxisIndex: 0}, {type: 'inside', yAxisIndex: 0}],
      series: [{type: 'heatmap', data: gcells, progressive: 20000}]});
    document.getElementById('chart-parallel-grid').setAttribute('data-culprits', pg.filter(culpritRow).map(function (r) { return r.rank; }).join(' '));
  }

  var km = rows(D.kernel_mode_cells);
  if (!km.length) empty('chart-kernel-modes', 'No compute kernels in this run: the CUPTI library (docs/cupti.md) or Kineto traces time them.');
  else {
    var krows = [], krowIx = {}, kCulprit = {}, kernels = [], kernelIx = {};
    km.forEach(function (r) {
      if (krowIx[r.row_label] === undefined) { krowIx[r.row_label] = krows.length; krows.push(r.row_label); }
      if (kernelIx[r.kernel] === undefined) { kernelIx[r.kernel] = kernels.length; kernels.push(r.kernel); }
      if (culpritRow(r)) kCulprit[r.row_label] = true;
    });
    var kylab = krows.slice().reverse(), kyIx = {}; kylab.forEach(function (l, i) { kyIx[l] = i; });
    var kcells = km.filter(function (r) { return r.ratio !== null; }).map(function (r) { return [kernelIx[r.kernel], kyIx[r.row_label], r.ratio, r.geo_us, r.executions, r.rank, r.hostname, r.ranks]; });
    chart('chart-kernel-modes', {tooltip: {confine: true, formatter: function (p) { var v = p.value; return esc(kylab[v[1]]) + (v[7] > 1 ? ' (worst: rank ' + v[5] + ')' : ' on ' + esc(v[6])) + '<br>' + esc(kernels[v[0]]) + '<br>' + num(v[3], 1) + ' \u00b5s (geometric mean of ' + num(v[4], 0) + ' executions), ' + v[2] + '\u00d7 its peers'; }},
      grid: {left: 120, right: 70, top: 10, bottom: 120},
      xAxis: {type: 'category', data: kernels, axisLabel: {rotate: 30, width: 160, overflow: 'truncate', hideOverlap: true}},
      yAxis: {type: 'category', data: kylab, axisLabel: rowLabels(kCulprit)},
      visualMap: Object.assign({dimension: 2, calculable: true, orient: 'vertical', right: 5, top: 'middle', precision: 2}, RATIO),
      dataZoom: [{type: 'inside', yAxisIndex: 0}],
      series: [{type: 'heatmap', data: kcells, progressive: 20000}]});
    document.getElementById('chart-kernel-modes').setAttribute('data-culprits', krows.filter(function (l) { return kCulprit[l]; }).join(' '));
  }

  // ---- range bars ----
  var rb = rows(D.range_bars);
  document.getElementById('ranges-note').textContent = rb.length ? 'min / p25 / median / p75 / max of busbw (GB/s) for the hottest kernel of at least ' + bytes(D.meta.min_bytes) + ': ' + sizeOf(rb[0].kernel_key) + '.' : '';
  var titles = {communicator: 'by communicator', host: 'by host', time_bin: 'by time bin', sn_bin: 'by sequence-number bin'};
  Object.keys(titles).forEach(function (dim) {
    var id = 'chart-range-' + dim;
    var g = rb.filter(function (r) { return r.dimension === dim; });
    if (dim === 'time_bin' || dim === 'sn_bin') g.sort(function (a, b) { return Number(a.group) - Number(b.group); });
    if (!g.length) return empty(id, 'No data ' + titles[dim] + '.');
    var t0 = dim === 'time_bin' ? Number(g[0].group) : 0;
    var labels = g.map(function (r) { return dim === 'time_bin' ? '+' + ((Number(r.group) - t0) / 1e6).toFixed(1) + ' s' : String(r.group); });
    chart(id, {title: {text: titles[dim], left: 'center', textStyle: {fontSize: 13, fontWeight: 600}},
      tooltip: {trigger: 'item', confine: true, formatter: function (p) { var r = g[p.dataIndex]; return esc(labels[p.dataIndex]) + '<br>min ' + num(r.min_busbw_gbs) + '<br>p25 ' + num(r.p25_busbw_gbs) + '<br>median ' + num(r.p50_busbw_gbs) + '<br>p75 ' + num(r.p75_busbw_gbs) + '<br>max ' + num(r.max_busbw_gbs) + '<br>' + r.records + ' records'; }},
      grid: {left: 55, right: 20, top: 34, bottom: 60}, xAxis: {type: 'category', data: labels, axisLabel: {hideOverlap: true}},
      yAxis: {type: 'value', name: 'GB/s', scale: true}, dataZoom: zoomXY,
      series: [{type: 'boxplot', itemStyle: {color: '#d1e5f0', borderColor: '#2f6fde'}, data: g.map(function (r) { return [r.min_busbw_gbs, r.p25_busbw_gbs, r.p50_busbw_gbs, r.p75_busbw_gbs, r.max_busbw_gbs]; })}]});
  });

  // ---- baseline ----
  var bb = document.getElementById('baseline-body');
  var cmp = rows(D.baseline);
  if (!D.meta.baseline) bb.innerHTML = '<div class="empty" id="no-baseline">No baseline run in this store. Store nccl-tests output with <code>collscope compare --baseline-log FILE --baseline NAME</code> to compare against it.</div>';
  else if (!cmp.length) bb.innerHTML = '<div class="empty" id="no-baseline">Baseline run ' + esc(D.meta.baseline) + ' has no (op, size, n_ranks) in common with this run.</div>';
  else {
    bb.appendChild(el('p', {class: 'note'}, 'Run ' + esc(D.meta.run) + ' against baseline ' + esc(D.meta.baseline) + ', per matching (op, message size, ranks).'));
    table(bb, [{title: 'op', key: 'op'}, {title: 'size', num: true, render: function (r) { return bytes(r.msg_size_bytes); }}, {title: 'ranks', key: 'n_ranks', num: true},
      {title: 'production mean busbw', num: true, render: function (r) { return num(r.prod_mean_busbw_gbs) + ' GB/s'; }}, {title: 'CV', num: true, render: function (r) { return r.prod_cv === null ? '' : (100 * r.prod_cv).toFixed(1) + '%'; }},
      {title: 'baseline mean busbw', num: true, render: function (r) { return num(r.base_mean_busbw_gbs) + ' GB/s'; }}, {title: 'CV', num: true, render: function (r) { return r.base_cv === null ? '' : (100 * r.base_cv).toFixed(1) + '%'; }},
      {title: 'production / baseline', render: function (r) { return normPill(r.mean_ratio); }}], cmp);
  }

  document.getElementById('footer').textContent = 'Generated by collscope on ' + D.meta.generated + '. Charts: Apache ECharts ' + (window.echarts ? echarts.version : '(missing)') + ', inlined.';
  window.addEventListener('resize', function () { charts.forEach(function (c) { c.resize(); }); });
  // Layout facts for the browser test, from DOM bounding boxes: the culprit names in view at
  // load (the first screen), and text boxes of the findings, summary and host table that overlap.
  var seen = [];
  document.querySelectorAll('#headline .culprit-name, .finding a.culprit-name').forEach(function (e) {
    var r = e.getBoundingClientRect();
    if (r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight && seen.indexOf(e.textContent) < 0) seen.push(e.textContent);
  });
  document.body.setAttribute('data-first-screen-culprits', seen.join(' '));
  var boxes = [];
  document.querySelectorAll('#summary *, #findings *, #host-table *').forEach(function (e) {
    if (e.children.length || !e.textContent.trim()) return;
    Array.prototype.forEach.call(e.getClientRects(), function (r) { if (r.width > 0 && r.height > 0) boxes.push([r, e]); });
  });
  var overlaps = [];
  for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
    var a = boxes[i][0], b = boxes[j][0];
    if (boxes[i][1] !== boxes[j][1] && Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1)
      overlaps.push(boxes[i][1].textContent.trim().slice(0, 30) + ' / ' + boxes[j][1].textContent.trim().slice(0, 30));
  }
  document.body.setAttribute('data-text-overlaps', String(overlaps.length));
  if (overlaps.length) document.body.setAttribute('data-text-overlap-examples', overlaps.slice(0, 5).join(' | '));
  document.body.setAttribute('data-rendered', 'ok');
  document.body.setAttribute('data-charts', String(charts.length));
})();
