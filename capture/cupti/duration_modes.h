// Online compression of kernel durations: a mergeable histogram in log space whose peaks become
// the distribution's modes, with no preset number of modes.
//
// Slowdowns are multiplicative (a clock throttled by 20% lengthens every kernel by 25%), so the
// histogram's bins are of equal width in log(duration): 1/64 of an octave (1.09%), so a bin is
// far narrower than the 5% the kernel-level diagnosis must tell apart. A histogram only grows
// where durations fall, adding is O(1), and two histograms of one kernel add up bin by bin.
//
// Modes: the bin counts are smoothed with a Gaussian kernel (a KDE evaluated on the bins, its
// bandwidth from Silverman's robust rule on the log durations), every local maximum of the
// smoothed density is a mode, and each bin belongs to the mode of the hill it lies on (the minima
// between maxima are the boundaries). Hills then merge: one holding under 3% of the samples
// joins the neighbour it is a bump on the flank of (its dip above half its peak), while a small
// hill standing apart (outliers) stays a mode, since folding it in would move its mass far; two
// hills whose dip is shallower than a quarter of the smaller peak join; beyond 8 modes the
// smallest join. Each mode is summarised as its count, geometric-mean centre and the standard
// deviation of its log durations; a reader reconstructs a mixture of log-normals from them.
//
// Nothing here locks, and nothing allocates per sample once a histogram has its range; growing
// one can throw std::bad_alloc, which the collector catches before it reaches CUPTI.
#pragma once

#include <cstdint>
#include <vector>

namespace collscope::capture {

struct DurationMode {
  uint64_t count = 0;
  double centre_ns = 0;  // exp(mean log duration)
  double spread = 0;     // standard deviation of log duration (natural log)
};

class LogHistogram {
 public:
  static constexpr int kBinsPerOctave = 64;

  void Add(uint64_t ns);
  void Merge(const LogHistogram& other);
  uint64_t count() const { return count_; }
  bool empty() const { return count_ == 0; }

  // The modes, sorted by centre; their counts add up to count().
  std::vector<DurationMode> Modes() const;

 private:
  static int BinOf(uint64_t ns);
  static double LogCentreOf(int bin);  // natural log of the bin's centre, in ns
  void Grow(int bin);

  int first_bin_ = 0;               // bin index of counts_[0]
  std::vector<uint32_t> counts_;
  uint64_t count_ = 0;
};

}  // namespace collscope::capture
