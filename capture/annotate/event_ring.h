// Bounded multi-producer, single-consumer ring of annotation events (Vyukov's bounded queue).
//
// Contract: Push never blocks, allocates or makes a system call; it returns false when the ring is
// full (the caller counts the drop). Pop is for one consumer thread. Capacity is a power of two.
#ifndef COLLSCOPE_CAPTURE_ANNOTATE_EVENT_RING_H_
#define COLLSCOPE_CAPTURE_ANNOTATE_EVENT_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace collscope::annotate {

enum class EventType : uint8_t { kStepBegin, kStepEnd, kPhaseBegin, kPhaseEnd, kMicroBatch, kParallel, kGpuTime };

inline constexpr size_t kNameBytes = 48;

struct Event {
  EventType type = EventType::kStepBegin;
  int64_t t_ns = 0;        // CLOCK_REALTIME
  int64_t value = 0;       // step number, micro-batch index
  double gpu_us = 0;
  int32_t parallel[12] = {};  // rank, world, then (rank, size) for dp, tp, pp, ep, cp
  char name[kNameBytes] = {};  // phase name, NUL-terminated ("" for none)
};

template <size_t kCapacity>
class EventRing {
  static_assert((kCapacity & (kCapacity - 1)) == 0, "capacity must be a power of two");

 public:
  EventRing() {
    for (size_t i = 0; i < kCapacity; ++i) slots_[i].seq.store(i, std::memory_order_relaxed);
  }

  bool Push(const Event& e) {
    size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Slot& s = slots_[pos & (kCapacity - 1)];
      const size_t seq = s.seq.load(std::memory_order_acquire);
      const intptr_t diff = static_cast<intptr_t>(seq) - static_cast<intptr_t>(pos);
      if (diff == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          s.event = e;
          s.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // full: the consumer has not freed this slot yet
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

  bool Pop(Event* out) {
    Slot& s = slots_[tail_ & (kCapacity - 1)];
    if (s.seq.load(std::memory_order_acquire) != tail_ + 1) return false;
    *out = s.event;
    s.seq.store(tail_ + kCapacity, std::memory_order_release);
    ++tail_;
    return true;
  }

 private:
  struct Slot {
    std::atomic<size_t> seq{0};
    Event event;
  };
  Slot slots_[kCapacity];
  alignas(64) std::atomic<size_t> head_{0};
  alignas(64) size_t tail_ = 0;  // consumer only
};

}  // namespace collscope::annotate

#endif  // COLLSCOPE_CAPTURE_ANNOTATE_EVENT_RING_H_
