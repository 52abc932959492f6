// The S0 bcast's window mode (shm_bcast.h, shm_window.h): threads as the local ranks of one
// window (a real POSIX segment, unlinked at once). Many broadcasts back to back from changing
// roots, some out of the root's window part (the readers copy straight out of it) and some out
// of ordinary memory (the queue), so that both modes advance the same control rings; readers
// receive into their own parts or ordinary memory and fall behind now and then; every root
// overwrites its part as soon as its call returns. A root that returned before every reader
// had copied shows as a reader holding the next message's bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bcast_node.h"
#include "shm/shm_bcast.h"
#include "shm/shm_window.h"
#include "test_support.h"

namespace topocoll::test {
namespace {

constexpr auto kDeadline = std::chrono::seconds(20);

TEST(ShmBcastWindow, ReadersCopyOutOfTheRootsWindowAndTheRootWaitsForThem) {
  constexpr size_t kRanks = 4;
  constexpr size_t kPart = 256 * 1024 + 40;
  ShmBcastParams params;
  params.queue_bytes = 64 * 1024;
  params.sets = 2;
  params.fragment_for_log2.assign(27, 8192);
  Node node(params, kRanks);
  WindowTable windows;
  const std::string name = "/topocoll-test-window-" + std::to_string(getpid());
  windows.Add(7, ShmWindow::Create(name, WindowLayout(std::vector<uint64_t>(kRanks, kPart))));
  ShmSegment::Unlink(name);
  size_t window_bytes = 0;
  uint8_t* base = windows.Base(7, &window_bytes);
  const WindowLayout layout(std::vector<uint64_t>(kRanks, kPart));

  struct Message {
    int root;
    size_t bytes;
    bool from_window, into_window;
  };
  std::mt19937 rng(99);
  std::vector<Message> messages;
  const std::vector<size_t> sizes = {kInlineBytes, kInlineBytes + 1, 4096, 8193, 65536 + 3, kPart};
  for (int k = 0; k < 300; ++k) {
    messages.push_back(Message{static_cast<int>(rng() % kRanks), sizes[rng() % sizes.size()], rng() % 4 != 0, rng() % 2 == 0});
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> verified{0};
  const WaitPolicy policy = TestPolicy();
  const std::string error = RunThreads(
      kRanks,
      [&](size_t me) {
        DeadlineGuard guard(kDeadline, &stop);
        ShmBcast bcast(params, node.regions(), node.doorbells(), static_cast<int>(me), &windows);
        std::vector<int> everyone;
        for (size_t i = 0; i < kRanks; ++i) everyone.push_back(static_cast<int>(i));
        bcast.SetGroup(0, everyone);
        uint8_t* part = base + layout.offsets[me];
        std::vector<uint8_t> plain(kPart);
        std::mt19937 local(static_cast<uint32_t>(me) + 5);
        for (size_t k = 0; k < messages.size(); ++k) {
          const Message& m = messages[k];
          const bool root = m.root == static_cast<int>(me);
          uint8_t* buf = (root ? m.from_window : m.into_window) ? part : plain.data();
          if (root)
            FillPattern(buf, m.bytes, k);
          else
            std::fill(buf, buf + m.bytes, uint8_t{0xEE});
          bcast.Run(0, m.root, buf, m.bytes, (uint64_t{k} + 1) << 24, static_cast<uint32_t>(k * 2654435761u), policy, guard);
          if (root) {
            // The part is the root's again: scribble over it at once.
            std::fill(buf, buf + m.bytes, uint8_t{0x55});
          } else {
            const size_t bad = FirstPatternMismatch(buf, m.bytes, k);
            if (bad != m.bytes) {
              throw std::runtime_error("message " + std::to_string(k) + " (" + std::to_string(m.bytes) + " bytes from rank " +
                                       std::to_string(m.root) + (m.from_window ? ", its window" : "") + "): byte " + std::to_string(bad) +
                                       " differs");
            }
            ++verified;
            if (local() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(local() % 300));
          }
        }
      },
      stop);
  EXPECT_EQ(error, "");
  EXPECT_EQ(verified.load(), messages.size() * (kRanks - 1));
  for (size_t i = 0; i < kRanks; ++i) EXPECT_EQ(windows.Counter(7, i)->readers.load(), 0u);
}

// A reader that does not map the root's window fails with EINVAL instead of reading anything.
TEST(ShmBcastWindow, AReaderWithoutTheWindowThrows) {
  ShmBcastParams params;
  params.queue_bytes = 64 * 1024;
  params.fragment_for_log2.assign(27, 8192);
  Node node(params, 2);
  WindowTable root_windows, reader_windows;
  const std::string name = "/topocoll-test-window-b-" + std::to_string(getpid());
  root_windows.Add(3, ShmWindow::Create(name, WindowLayout({8192, 8192})));
  ShmSegment::Unlink(name);
  size_t bytes = 0;
  uint8_t* part = root_windows.Base(3, &bytes) + WindowLayout({8192, 8192}).offsets[0];
  std::atomic<bool> stop{false};
  std::string caught;
  const WaitPolicy policy = TestPolicy();
  const std::string error = RunThreads(
      2,
      [&](size_t me) {
        DeadlineGuard guard(std::chrono::seconds(2), &stop);
        ShmBcast bcast(params, node.regions(), node.doorbells(), static_cast<int>(me), me == 0 ? &root_windows : &reader_windows);
        bcast.SetGroup(0, {0, 1});
        std::vector<uint8_t> plain(4096);
        if (me == 0) {
          try {
            bcast.Run(0, 0, part, 4096, 1 << 24, 1, policy, guard);
          } catch (const std::exception&) {
            // The deadline: the reader never counted itself out.
          }
        } else {
          try {
            bcast.Run(0, 0, plain.data(), 4096, 1 << 24, 1, policy, guard);
          } catch (const CollError& e) {
            caught = e.code() + std::string(": ") + e.what();
          }
        }
      },
      stop);
  EXPECT_EQ(error, "");
  EXPECT_EQ(caught.rfind("EINVAL: ", 0), 0u) << caught;
}

}  // namespace
}  // namespace topocoll::test
