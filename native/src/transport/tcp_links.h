// TCP connections to the ranks of other nodes this rank shares a group with. Each connection
// starts with the job token and the connecting rank, so a stranger that reaches the port is
// dropped without effect: the listening socket is bound to the one address the rank published,
// connections are accepted concurrently, and each has kGreetingMs to greet before it is closed
// (silent connections cannot hold the real ranks off). Sockets are non-blocking and every wait
// goes through poll() in short slices, so aborts and dead peers are noticed while waiting.
#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/message.h"
#include "base/wait.h"
#include "transport/remote_links.h"

namespace topocoll {

// Every stream socket of the transports: no Nagle delay, and 4 MiB buffers each way.
void TuneStreamSocket(int fd);

struct TcpPeer {
  int rank;
  std::string host;
  int port;
};

class TcpLinks final : public RemoteLinks {
 public:
  TcpLinks() = default;
  TcpLinks(const TcpLinks&) = delete;
  TcpLinks& operator=(const TcpLinks&) = delete;
  ~TcpLinks() override;

  // Opens the listening socket on an ephemeral port of `address` (dotted IPv4); returns the port.
  int Listen(const std::string& address);

  // Connects to every peer with a lower rank and accepts every peer with a higher one, waiting
  // at most wait_ms; returns the peers not linked yet (empty: done). Call again for the rest:
  // links made and connections still greeting are kept between calls.
  std::vector<int> Establish(int my_rank, const std::string& token, const std::vector<TcpPeer>& peers, int wait_ms, WaitGuard& guard);
  // Why the last connect to a lower rank failed (for the caller's timeout message).
  const std::string& last_connect_error() const { return last_connect_error_; }

  static constexpr size_t kTokenBytes = 32;
  // The hello a connecting rank sends: the token (padded) and its rank.
  struct Hello {
    char token[kTokenBytes];
    int32_t rank;
  };

  bool Connected(int rank) const { return fds_.count(rank) != 0; }

  // How a read that finds nothing waits before it sleeps in poll(): a few microseconds of
  // non-blocking reads save the wake-up latency when a core is free for them.
  struct ReadSpin {
    // Attempts at most (0: none, as when processes outnumber cores).
    uint32_t attempts = 0;
    // For at most this long (zero: no bound but the attempts). A remote peer's answer takes
    // longer than a wake-up from poll() costs past this: spinning on would gain nothing.
    std::chrono::microseconds for_at_most{0};
    // waits: auto: no spin while others' work holds the cores, and a spin that lost its core
    // (a gap of `taken_after` between two attempts) records that and stops (base/wait.h).
    ContentionSignal* contention = nullptr;
    std::chrono::microseconds taken_after{50};
  };
  void SetReadSpin(const ReadSpin& spin) { read_spin_ = spin; }

  void Send(int rank, const ByteSlice* slices, size_t count, WaitGuard& guard) override;
  bool DuplexExchanges() const override { return true; }
  // The send goes out in what each socket takes without waiting: first at once, then whenever a
  // read inside `receive` finds nothing (its poll() also waits for room on `rank`'s socket),
  // then the rest. Both peers of an exchange read while they write, so neither waits for the
  // other to drain a whole segment first.
  void SendWhileReceiving(int rank, const ByteSlice* slices, size_t count, Borrowed receive, WaitGuard& guard) override;
  void ReadHeader(int rank, MsgHeader* header, WaitGuard& guard) override { ReadExact(rank, header, sizeof *header, guard); }
  void ReadBody(int rank, void* dst, size_t n, WaitGuard& guard) override { ReadExact(rank, dst, n, guard); }
  // Sends a small message only if the socket takes it whole at once (never blocks).
  void TrySend(int rank, const void* data, size_t n) override;
  // Sends a failing rank's notice on every link, waiting for room (a peer still reading the
  // stream drains it) for at most budget_ms in all; failures are ignored: the links close next.
  void SendLastWords(const void* data, size_t n, int budget_ms) override;

  // Shuts every connection down so that peers blocked on them see the failure at once.
  void ShutdownAll() override;
  void CloseAll() override;

 private:
  // A message on its way out: what of its slices is left.
  struct Outgoing {
    int fd = -1;
    int rank = -1;
    iovec iov[4]{};
    size_t first = 0;
    size_t n = 0;
    Outgoing(int fd, int rank, const ByteSlice* slices, size_t count);
    bool done() const { return first >= n; }
  };
  // Writes what `out`'s socket takes now; returns whether anything went. A failed link throws
  // PeerClosed (with what the peer sent last).
  bool WriteSome(Outgoing& out, WaitGuard& guard);
  void ReadExact(int rank, void* dst, size_t n, WaitGuard& guard);
  // The last bytes of what `fd`'s stream still holds unread (for a failed write: PeerClosed).
  static std::string UnreadTail(int fd);
  int FdOf(int rank) const;
  void WaitFd(int fd, short events, int rank, WaitGuard& guard);

  // An accepted connection that has not greeted yet.
  struct Greeting {
    int fd;
    std::chrono::steady_clock::time_point deadline;
    Hello hello;
    size_t got;
  };
  std::vector<Greeting> greeting_;
  std::string last_connect_error_;
  int listen_fd_ = -1;
  ReadSpin read_spin_;
  // The send of the exchange under way (SendWhileReceiving), pushed on by the reads' waits.
  Outgoing* pumping_ = nullptr;
  std::unordered_map<int, int> fds_;
};

}  // namespace topocoll
