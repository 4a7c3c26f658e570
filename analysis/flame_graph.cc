#include "analysis/flame_graph.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <deque>
#include <map>
#include <queue>
#include <string_view>
#include <tuple>
#include <unordered_set>

namespace collscope {
namespace {

constexpr size_t kMaxTitleBytes = 2048;  // a frame's text in its box's title
constexpr size_t kMaxLabelBytes = 160;   // ... and as the box's visible label

std::string Escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '\n':
        out += "&#10;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// At most `bytes` of s, cut before a UTF-8 continuation byte, with an ellipsis when cut.
std::string Clip(const std::string& s, size_t bytes) {
  if (s.size() <= bytes) return s;
  size_t end = bytes;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xC0) == 0x80) --end;
  return s.substr(0, end) + "\xE2\x80\xA6";
}

// "75", "33.333": a percentage with at most three decimals.
std::string Percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string Share(double v) {  // for people: "42.5%", "0.8%"
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", v);
  return buf;
}

// The tree while it is built: children found by name in a map, nodes in a deque (whose elements
// never move, so the maps' keys can view their kids' own frame strings).
struct ArenaNode {
  std::string frame;
  int64_t count = 0;
  std::map<std::string_view, size_t> kids;  // views of the kids' frame strings
};

FlameNode Convert(std::deque<ArenaNode>& arena, size_t i) {
  FlameNode n;
  n.frame = std::move(arena[i].frame);
  n.count = arena[i].count;
  n.children.reserve(arena[i].kids.size());
  for (const auto& kid : arena[i].kids) n.children.push_back(Convert(arena, kid.second));
  return n;
}

struct Render {
  explicit Render(const FlameGraphOptions& options) : o(options) {}
  const FlameGraphOptions& o;
  int64_t total = 0;
  std::unordered_set<const FlameNode*> drawn;
  std::string html;

  void Box(const FlameNode& n, int64_t parent_count, bool root) {
    const double width = 100.0 * static_cast<double>(n.count) / static_cast<double>(parent_count);
    const std::string frame = root ? o.root_label : n.frame.empty() ? "(empty frame)" : n.frame;
    const char* cls = root ? "fg-root" : IsPythonFrame(n.frame) ? "fg-py" : "fg-nat";
    html += "<div class=\"fg-n\" style=\"width:" + Percent(width) + "%\"><div class=\"fg-f " + cls +
            "\" title=\"" + Escape(Clip(frame, kMaxTitleBytes)) + "&#10;" +
            std::to_string(n.count) + (n.count == 1 ? " sample, " : " samples, ") +
            Share(100.0 * static_cast<double>(n.count) / static_cast<double>(total)) + "\">" +
            Escape(Clip(frame, kMaxLabelBytes)) + "</div>";
    bool open = false;
    for (const FlameNode& c : n.children) {
      if (!drawn.count(&c)) continue;
      if (!open) html += "<div class=\"fg-c\">";
      open = true;
      Box(c, n.count, false);
    }
    if (open) html += "</div>";
    html += "</div>";
  }
};

}  // namespace

bool IsPythonFrame(const std::string& frame) {
  if (frame.size() < 6 || frame.back() != ')') return false;
  const size_t open = frame.rfind(" (");
  const size_t colon = frame.rfind(':');
  if (open == std::string::npos || colon == std::string::npos || colon < open) return false;
  if (colon + 2 >= frame.size()) return false;  // no line number
  for (size_t i = colon + 1; i + 1 < frame.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(frame[i]))) return false;
  return true;
}

FlameNode FlameTreeOf(const std::vector<FoldedStack>& stacks, size_t max_depth, size_t* cut) {
  std::deque<ArenaNode> arena(1);
  size_t deep = 0;
  for (const FoldedStack& s : stacks) {
    if (s.count <= 0) continue;
    arena[0].count += s.count;
    size_t at = 0, depth = 0, begin = 0;
    while (begin <= s.frames.size()) {
      if (depth == max_depth) {
        ++deep;
        break;
      }
      size_t end = s.frames.find(';', begin);
      if (end == std::string::npos) end = s.frames.size();
      const std::string_view name(s.frames.data() + begin, end - begin);
      auto it = arena[at].kids.find(name);
      size_t kid;
      if (it == arena[at].kids.end()) {
        kid = arena.size();
        arena.emplace_back();
        arena.back().frame = std::string(name);
        arena[at].kids.emplace(arena[kid].frame, kid);
      } else {
        kid = it->second;
      }
      arena[kid].count += s.count;
      at = kid;
      ++depth;
      begin = end + 1;
    }
  }
  if (cut) *cut = deep;
  return Convert(arena, 0);
}

std::string FlameGraphHtml(const std::vector<FoldedStack>& stacks, const FlameGraphOptions& o) {
  size_t deep = 0;
  const FlameNode root = FlameTreeOf(stacks, o.max_depth, &deep);
  if (root.count <= 0 || o.max_boxes == 0) return "";
  Render r(o);
  r.total = root.count;
  // The widest boxes first: a box is a candidate once its caller is drawn, and no callee is wider
  // than its caller, so the boxes drawn are the max_boxes widest of the tree.
  const double min_count = o.min_share * static_cast<double>(root.count);
  using Candidate = std::tuple<int64_t, size_t, const FlameNode*>;  // count, -order, node
  auto narrower = [](const Candidate& a, const Candidate& b) {
    return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) < std::get<0>(b)
                                            : std::get<1>(a) > std::get<1>(b);
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(narrower)> queue(narrower);
  size_t order = 0, narrow = 0;
  queue.emplace(root.count, order++, &root);
  while (!queue.empty() && r.drawn.size() < o.max_boxes) {
    const FlameNode* n = std::get<2>(queue.top());
    queue.pop();
    r.drawn.insert(n);
    for (const FlameNode& c : n->children) {
      if (static_cast<double>(c.count) < min_count)
        ++narrow;
      else
        queue.emplace(c.count, order++, &c);
    }
  }
  const size_t past_cap = queue.size();
  r.html = "<div class=\"flame\" data-samples=\"" + std::to_string(root.count) +
           "\" data-boxes=\"" + std::to_string(r.drawn.size()) + "\">";
  r.Box(root, root.count, true);
  r.html += "</div>";
  std::string left_out;
  auto part = [&left_out](const std::string& s) { left_out += (left_out.empty() ? "" : "; ") + s; };
  if (narrow)
    part(std::to_string(narrow) + " frame" + (narrow > 1 ? "s" : "") + " under " +
         Share(100 * o.min_share) + " of the samples");
  if (past_cap)
    part(std::to_string(past_cap) + " frame" + (past_cap > 1 ? "s" : "") + " past the " +
         std::to_string(o.max_boxes) + " widest boxes");
  if (deep)
    part(std::to_string(deep) + " stack" + (deep > 1 ? "s" : "") + " cut below " +
         std::to_string(o.max_depth) + " frames");
  if (!left_out.empty())
    r.html += "<p class=\"note fg-left-out\">Not drawn: " + left_out +
              " (with their callees; their samples stay in their callers' widths).</p>";
  return r.html;
}

std::string FlameGraphHtml(const std::vector<FoldedStack>& stacks, size_t max_boxes) {
  FlameGraphOptions o;
  o.max_boxes = max_boxes;
  return FlameGraphHtml(stacks, o);
}

}  // namespace collscope
