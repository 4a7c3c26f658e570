#include "analysis/flame_graph.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace collscope {
namespace {

FoldedStack Stack(const std::string& frames, int64_t count) {
  FoldedStack s;
  s.pid = s.tid = 7;
  s.frames = frames;
  s.count = count;
  return s;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size()))
    ++n;
  return n;
}

// The box of `frame`: its opening tags up to its label.
std::string BoxOf(const std::string& html, const std::string& frame) {
  const size_t label = html.find("\">" + frame + "</div>");
  if (label == std::string::npos) return "";
  const size_t open = html.rfind("<div class=\"fg-n\"", label);
  return html.substr(open, label + 2 + frame.size() - open);
}

TEST(FlameGraph, TreeMergesSharedPrefixes) {
  const FlameNode root = FlameTreeOf({Stack("a;b;c", 3), Stack("x", 4), Stack("a;b;d", 1),
                                      Stack("a;e", 2), Stack("a;b;c", 0), Stack("a;b;c", -5)});
  EXPECT_EQ(root.count, 10);
  ASSERT_EQ(root.children.size(), 2u);
  const FlameNode& a = root.children[0];
  EXPECT_EQ(a.frame, "a");
  EXPECT_EQ(a.count, 6);
  EXPECT_EQ(root.children[1].frame, "x");
  EXPECT_EQ(root.children[1].count, 4);
  EXPECT_TRUE(root.children[1].children.empty());
  ASSERT_EQ(a.children.size(), 2u);
  const FlameNode& b = a.children[0];
  EXPECT_EQ(b.frame, "b");
  EXPECT_EQ(b.count, 4);
  EXPECT_EQ(a.children[1].frame, "e");
  EXPECT_EQ(a.children[1].count, 2);
  ASSERT_EQ(b.children.size(), 2u);
  EXPECT_EQ(b.children[0].frame, "c");
  EXPECT_EQ(b.children[0].count, 3);
  EXPECT_EQ(b.children[1].frame, "d");
  EXPECT_EQ(b.children[1].count, 1);
  // The same frame under another caller is another box.
  const FlameNode r2 = FlameTreeOf({Stack("a;c", 1), Stack("b;c", 1), Stack("a;c", 2)});
  ASSERT_EQ(r2.children.size(), 2u);
  EXPECT_EQ(r2.children[0].children.at(0).count, 3);
  EXPECT_EQ(r2.children[1].children.at(0).count, 1);
  // Many distinct frames (the builder's maps view the frames' own strings).
  std::vector<FoldedStack> many;
  for (int i = 0; i < 500; ++i) many.push_back(Stack("m;f" + std::to_string(i) + ";g", 1));
  const FlameNode r3 = FlameTreeOf(many);
  ASSERT_EQ(r3.children.size(), 1u);
  EXPECT_EQ(r3.children[0].children.size(), 500u);
  for (const FlameNode& f : r3.children[0].children) {
    ASSERT_EQ(f.children.size(), 1u);
    EXPECT_EQ(f.children[0].frame, "g");
  }
  EXPECT_EQ(FlameGraphHtml({}), "");
  EXPECT_EQ(FlameGraphHtml({Stack("a", 0)}), "");
}

// Each box's width is its share of its caller's (nested blocks), its title the frame, its
// samples and its share of all samples.
TEST(FlameGraph, WidthsAreProportionalToSamples) {
  const std::string html =
      FlameGraphHtml({Stack("a;b;c", 3), Stack("x", 4), Stack("a;b;d", 1), Stack("a;e", 2)});
  EXPECT_NE(html.find("<div class=\"flame\" data-samples=\"10\" data-boxes=\"7\">"),
            std::string::npos)
      << html;
  EXPECT_EQ(Count(html, "class=\"fg-n\""), 7u);
  EXPECT_NE(BoxOf(html, "all").find("style=\"width:100%\""), std::string::npos) << html;
  EXPECT_NE(BoxOf(html, "all").find("title=\"all&#10;10 samples, 100.0%\""), std::string::npos);
  EXPECT_NE(BoxOf(html, "a").find("style=\"width:60%\""), std::string::npos) << BoxOf(html, "a");
  EXPECT_NE(BoxOf(html, "x").find("style=\"width:40%\""), std::string::npos);
  EXPECT_NE(BoxOf(html, "b").find("style=\"width:66.667%\""), std::string::npos);  // 4 of a's 6
  EXPECT_NE(BoxOf(html, "b").find("title=\"b&#10;4 samples, 40.0%\""), std::string::npos)
      << BoxOf(html, "b");
  EXPECT_NE(BoxOf(html, "c").find("style=\"width:75%\""), std::string::npos);  // 3 of b's 4
  EXPECT_NE(BoxOf(html, "d").find("title=\"d&#10;1 sample, 10.0%\""), std::string::npos);
  // Icicle: a callee's box is nested in its caller's.
  EXPECT_LT(html.find(">a</div>"), html.find(">b</div>"));
  EXPECT_LT(html.find(">b</div>"), html.find(">c</div>"));
  EXPECT_EQ(html.find("fg-left-out"), std::string::npos);  // nothing left out
}

TEST(FlameGraph, PythonAndNativeFramesHaveTheirOwnColours) {
  EXPECT_TRUE(IsPythonFrame("train_step (train.py:42)"));
  EXPECT_TRUE(IsPythonFrame("<module> (/a b/train.py:1)"));
  EXPECT_FALSE(IsPythonFrame("pthread_cond_wait"));
  EXPECT_FALSE(IsPythonFrame("libc.so.6+0x8f2a1"));
  EXPECT_FALSE(IsPythonFrame("f (x.py:)"));
  EXPECT_FALSE(IsPythonFrame("operator() (int)"));
  const std::string html =
      FlameGraphHtml({Stack("Py_RunMain;train_step (train.py:42);cudaStreamSynchronize", 5)});
  EXPECT_NE(BoxOf(html, "Py_RunMain").find("class=\"fg-f fg-nat\""), std::string::npos) << html;
  EXPECT_NE(BoxOf(html, "train_step (train.py:42)").find("class=\"fg-f fg-py\""),
            std::string::npos);
  EXPECT_NE(BoxOf(html, "cudaStreamSynchronize").find("class=\"fg-f fg-nat\""), std::string::npos);
  EXPECT_NE(BoxOf(html, "all").find("class=\"fg-f fg-root\""), std::string::npos);
}

// Frames under 0.5% of the samples are not drawn; their samples stay in their caller's width.
TEST(FlameGraph, NarrowFramesAreLeftOut) {
  const std::string html = FlameGraphHtml(
      {Stack("main;wide", 995), Stack("main;thin;deeper", 4), Stack("main;thin2", 1)});
  EXPECT_NE(html.find(">wide</div>"), std::string::npos);
  EXPECT_EQ(html.find(">thin</div>"), std::string::npos);
  EXPECT_EQ(html.find(">deeper</div>"), std::string::npos);
  EXPECT_EQ(html.find(">thin2</div>"), std::string::npos);
  EXPECT_NE(BoxOf(html, "wide").find("style=\"width:99.5%\""), std::string::npos);
  EXPECT_NE(html.find("Not drawn: 2 frames under 0.5% of the samples"), std::string::npos) << html;
  EXPECT_NE(html.find("data-boxes=\"3\""), std::string::npos);
}

// The box cap: the widest boxes are drawn, never more than the cap, and a note says how many
// were left out.
TEST(FlameGraph, BoxesAreCappedWidestFirst) {
  // 10 stacks of 5 frames each, distinct frames, stack i with 10 + i samples.
  std::vector<FoldedStack> stacks;
  for (int i = 0; i < 10; ++i) {
    std::string frames;
    for (int d = 0; d < 5; ++d)
      frames += (d ? ";" : "") + std::string("s") + std::to_string(i) + "f" + std::to_string(d);
    stacks.push_back(Stack(frames, 10 + i));
  }
  const std::string all = FlameGraphHtml(stacks);
  EXPECT_EQ(Count(all, "class=\"fg-n\""), 51u);
  const std::string capped = FlameGraphHtml(stacks, 22);
  EXPECT_EQ(Count(capped, "class=\"fg-n\""), 22u);
  EXPECT_NE(capped.find("data-boxes=\"22\""), std::string::npos);
  // The root, the four widest stacks whole (20 boxes: 19, 18, 17 and 16 samples), then the
  // first frame of the fifth.
  for (int i = 6; i < 10; ++i)
    EXPECT_NE(capped.find(">s" + std::to_string(i) + "f4</div>"), std::string::npos) << i;
  EXPECT_NE(capped.find(">s5f0</div>"), std::string::npos);
  EXPECT_EQ(capped.find(">s5f1</div>"), std::string::npos);
  EXPECT_EQ(capped.find(">s0f0</div>"), std::string::npos);
  EXPECT_NE(capped.find("Not drawn: 6 frames past the 22 widest boxes"), std::string::npos)
      << capped.substr(capped.find("fg-left-out"));

  // The default cap bounds the HTML: 150 stacks of 20 distinct frames (3,000 boxes of 0.67%).
  std::vector<FoldedStack> big;
  for (int i = 0; i < 150; ++i) {
    std::string frames;
    for (int d = 0; d < 20; ++d)
      frames += (d ? ";" : "") + std::string("frame_number_") + std::to_string(i) + "_" +
                std::to_string(d);
    big.push_back(Stack(frames, 1));
  }
  const std::string bounded = FlameGraphHtml(big);
  EXPECT_EQ(Count(bounded, "class=\"fg-n\""), kFlameMaxBoxes);
  EXPECT_LT(bounded.size(), kFlameMaxBoxes * 300);
  EXPECT_NE(bounded.find("past the 2000 widest boxes"), std::string::npos);
}

TEST(FlameGraph, DepthIsCapped) {
  std::string frames;
  for (int d = 0; d < 100; ++d) frames += (d ? ";" : "") + std::string("d") + std::to_string(d);
  FlameGraphOptions o;
  o.max_depth = 64;
  const std::string html = FlameGraphHtml({Stack(frames, 3)}, o);
  EXPECT_NE(html.find(">d63</div>"), std::string::npos);
  EXPECT_EQ(html.find(">d64</div>"), std::string::npos);
  EXPECT_EQ(Count(html, "class=\"fg-n\""), 65u);
  EXPECT_NE(html.find("1 stack cut below 64 frames"), std::string::npos);
  size_t cut = 0;
  EXPECT_EQ(FlameTreeOf({Stack(frames, 3), Stack("d0", 1)}, 10, &cut).children.at(0).count, 4);
  EXPECT_EQ(cut, 1u);
}

// Frame text is HTML-escaped in the label and the title: a C++ symbol cannot open a tag, and a
// quote cannot end the attribute.
TEST(FlameGraph, FrameTextIsEscaped) {
  const std::string frame = "operator<< <std::vector<int>&> \"q\" 'a'";
  const std::string html = FlameGraphHtml({Stack("main;" + frame + ";<script>x</script>", 2)});
  EXPECT_EQ(html.find("<<"), std::string::npos);
  EXPECT_EQ(html.find("<std"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("\"q\""), std::string::npos);
  const std::string escaped =
      "operator&lt;&lt; &lt;std::vector&lt;int&gt;&amp;&gt; &quot;q&quot; &#39;a&#39;";
  EXPECT_NE(html.find("title=\"" + escaped + "&#10;2 samples, 100.0%\">" + escaped + "</div>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("&lt;script&gt;x&lt;/script&gt;"), std::string::npos);
  // A very long frame: the label is cut (with an ellipsis), the title keeps 2 KiB of it.
  const std::string longest(5000, 'z');
  const std::string l = FlameGraphHtml({Stack(longest, 1)});
  EXPECT_NE(l.find(">" + std::string(160, 'z') + "\xE2\x80\xA6</div>"), std::string::npos);
  EXPECT_NE(l.find("title=\"" + std::string(2048, 'z') + "\xE2\x80\xA6&#10;"), std::string::npos);
  EXPECT_EQ(l.find(std::string(2049, 'z')), std::string::npos);
}

}  // namespace
}  // namespace collscope
