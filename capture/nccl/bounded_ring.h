// Bounded lock-free ring: many producers (any NCCL thread completing an operation), one consumer
// at a time (the writer thread, or finalize; callers serialise consumers with their own mutex).
//
// Contract: TryPush never blocks, allocates or makes a system call; when the ring is full it
// returns false and the caller counts a drop. Memory is fixed at construction. Each cell carries
// a sequence number (the classic bounded-queue design): a producer claims the cell whose sequence
// equals its ticket, fills it, then publishes ticket+1; the consumer frees it for the next lap by
// storing ticket+capacity. The cell index passed to the fill/visit callbacks lets callers keep
// side arrays (verbose per-channel traces) with the same lifetime as the cell.
#ifndef COLLSCOPE_CAPTURE_NCCL_BOUNDED_RING_H_
#define COLLSCOPE_CAPTURE_NCCL_BOUNDED_RING_H_

#include <atomic>
#include <cstdint>
#include <memory>

namespace collscope::capture {

template <typename T>
class BoundedRing {
 public:
  // capacity must be a power of two >= 2.
  explicit BoundedRing(uint32_t capacity)
      : mask_(capacity - 1), cells_(std::make_unique<Cell[]>(capacity)) {
    for (uint32_t i = 0; i < capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  BoundedRing(const BoundedRing&) = delete;
  BoundedRing& operator=(const BoundedRing&) = delete;

  uint32_t capacity() const { return mask_ + 1; }

  // Cells claimed and not yet consumed (a moment's view: producers and the consumer move on).
  uint64_t SizeApprox() const noexcept {
    const uint64_t t = tail_.load(std::memory_order_relaxed), h = head_.load(std::memory_order_relaxed);
    return t > h ? t - h : 0;
  }

  // fill(T&, uint32_t cell_index) runs while the cell is exclusively ours.
  template <typename Fill>
  bool TryPush(Fill&& fill) noexcept {
    uint64_t pos = tail_.load(std::memory_order_relaxed);
    Cell* cell;
    for (;;) {
      cell = &cells_[pos & mask_];
      const uint64_t seq = cell->seq.load(std::memory_order_acquire);
      const int64_t dif = static_cast<int64_t>(seq) - static_cast<int64_t>(pos);
      if (dif == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) break;
      } else if (dif < 0) {
        return false;  // full: the consumer has not freed this cell yet
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
    fill(cell->value, static_cast<uint32_t>(pos & mask_));
    cell->seq.store(pos + 1, std::memory_order_release);
    return true;
  }

  // visit(const T&, uint32_t cell_index) sees the oldest published cell. One consumer at a time.
  template <typename Visit>
  bool TryPop(Visit&& visit) {
    const uint64_t pos = head_.load(std::memory_order_relaxed);
    Cell* cell = &cells_[pos & mask_];
    const uint64_t seq = cell->seq.load(std::memory_order_acquire);
    if (seq != pos + 1) return false;  // empty, or the producer has not published yet
    visit(static_cast<const T&>(cell->value), static_cast<uint32_t>(pos & mask_));
    cell->seq.store(pos + mask_ + 1, std::memory_order_release);
    head_.store(pos + 1, std::memory_order_relaxed);
    return true;
  }

 private:
  struct Cell {
    std::atomic<uint64_t> seq{0};
    T value{};
  };
  const uint64_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) std::atomic<uint64_t> head_{0};
};

}  // namespace collscope::capture

#endif  // COLLSCOPE_CAPTURE_NCCL_BOUNDED_RING_H_
