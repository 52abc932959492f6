#include "transport/tcp_links.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/errors.h"

namespace topocoll {

namespace {

constexpr int kSliceMs = 20;
constexpr size_t kTokenBytes = TcpLinks::kTokenBytes;
// How long an accepted connection has to send its whole greeting.
constexpr int kGreetingMs = 2000;
// Bytes before an unexpected end of stream kept for the reader (PeerClosed): one MsgHeader.
constexpr size_t kTailBytes = 32;
// Connections greeting at once (the rest wait in the listen backlog until one is settled).
constexpr size_t kMaxGreeting = 256;

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

TcpLinks::Hello MakeHello(const std::string& token, int rank) {
  TcpLinks::Hello h{};
  std::memcpy(h.token, token.data(), token.size() < kTokenBytes ? token.size() : kTokenBytes);
  h.rank = rank;
  return h;
}

}  // namespace

void TuneStreamSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  // Large buffers let a sender run ahead of its receiver for mid-sized messages.
  int bytes = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

TcpLinks::~TcpLinks() { CloseAll(); }

int TcpLinks::Listen(const std::string& address) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;
  if (inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) {
    throw CollError("EINVAL", "cannot listen on '" + address + "': not an IPv4 address");
  }
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw CollError("EINVAL", "cannot create a TCP socket: " + ErrnoText(errno));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listen_fd_, 1024) != 0) {
    throw CollError("EINVAL", "cannot listen on a TCP port of " + address + ": " + ErrnoText(errno));
  }
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  SetNonBlocking(listen_fd_);
  return ntohs(addr.sin_port);
}

std::vector<int> TcpLinks::Establish(int my_rank, const std::string& token, const std::vector<TcpPeer>& peers, int wait_ms,
                                     WaitGuard& guard) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  auto expired = [&] { return std::chrono::steady_clock::now() > deadline; };
  const Hello mine = MakeHello(token, my_rank);
  std::vector<int> missing;
  // Connect to the lower ranks (they listen before anyone connects; a refused connect is retried).
  for (const TcpPeer& p : peers) {
    if (p.rank > my_rank || fds_.count(p.rank) != 0) continue;
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(p.host.c_str(), std::to_string(p.port).c_str(), &hints, &res) != 0 || res == nullptr) {
      throw CollError("EPEERLOST", "cannot resolve host " + p.host + " of rank " + std::to_string(p.rank));
    }
    int fd = -1;
    for (;;) {
      fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) break;
      last_connect_error_ =
          "cannot connect to rank " + std::to_string(p.rank) + " at " + p.host + ":" + std::to_string(p.port) + ": " + ErrnoText(errno);
      close(fd);
      fd = -1;
      if (expired()) break;
      guard.Check();
      usleep(10000);
    }
    freeaddrinfo(res);
    if (fd < 0) {
      missing.push_back(p.rank);
      continue;
    }
    TuneStreamSocket(fd);
    if (::send(fd, &mine, sizeof mine, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof mine)) {
      close(fd);
      throw CollError("EPEERLOST", "cannot greet rank " + std::to_string(p.rank) + ": " + ErrnoText(errno));
    }
    SetNonBlocking(fd);
    fds_[p.rank] = fd;
  }
  // Accept the higher ranks, every connection at once: each must greet with the token and a
  // rank expected here within kGreetingMs, or it is closed without effect. Connections still
  // greeting when the wait ends are kept for the next call.
  auto expected_accepts = [&] {
    size_t n = 0;
    for (const TcpPeer& p : peers) n += p.rank > my_rank && fds_.count(p.rank) == 0 ? 1 : 0;
    return n;
  };
  std::vector<pollfd> fds;
  while (expected_accepts() > 0 && !expired()) {
    fds.assign(1, pollfd{listen_fd_, POLLIN, 0});
    for (const Greeting& g : greeting_) fds.push_back(pollfd{g.fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), kSliceMs) <= 0) guard.Check();
    const auto now = std::chrono::steady_clock::now();
    // Read what the greeting connections sent; settle those that are complete, wrong or late.
    for (size_t i = greeting_.size(); i-- > 0;) {
      Greeting& g = greeting_[i];
      bool drop = now > g.deadline;
      if (!drop && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        ssize_t r = recv(g.fd, reinterpret_cast<char*>(&g.hello) + g.got, sizeof g.hello - g.got, MSG_DONTWAIT);
        if (r > 0)
          g.got += static_cast<size_t>(r);
        else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
          drop = true;
      }
      bool accepted = false;
      if (!drop && g.got == sizeof g.hello) {
        bool known = false;
        for (const TcpPeer& p : peers) known = known || (p.rank == g.hello.rank && p.rank > my_rank);
        accepted = std::memcmp(g.hello.token, mine.token, kTokenBytes) == 0 && known && fds_.count(g.hello.rank) == 0;
        drop = !accepted;  // a stranger, a wrong token or a duplicate
      }
      if (accepted) {
        TuneStreamSocket(g.fd);
        fds_[g.hello.rank] = g.fd;
      } else if (drop) {
        close(g.fd);
      }
      if (accepted || drop) {
        greeting_[i] = greeting_.back();
        greeting_.pop_back();
      }
    }
    // New connections; beyond kMaxGreeting at once the oldest keep their turn.
    while ((fds[0].revents & POLLIN) != 0 && greeting_.size() < kMaxGreeting) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) break;
      greeting_.push_back(Greeting{fd, now + std::chrono::milliseconds(kGreetingMs), Hello{}, 0});
    }
  }
  for (const TcpPeer& p : peers) {
    if (p.rank > my_rank && fds_.count(p.rank) == 0) missing.push_back(p.rank);
  }
  return missing;
}

int TcpLinks::FdOf(int rank) const {
  auto it = fds_.find(rank);
  if (it == fds_.end()) throw CollError("EINVAL", "no connection to rank " + std::to_string(rank) + " (not in a shared group)");
  return it->second;
}

void TcpLinks::WaitFd(int fd, short events, int rank, WaitGuard& guard) {
  // A read inside an exchange also wakes when the exchange's send has room to go on.
  const bool pump = events == POLLIN && pumping_ != nullptr && !pumping_->done();
  for (;;) {
    pollfd pfd[2] = {{fd, events, 0}, {pump ? pumping_->fd : -1, POLLOUT, 0}};
    nfds_t count = 1;
    if (pump && pumping_->fd == fd)
      pfd[0].events |= POLLOUT;
    else if (pump)
      count = 2;
    int r = poll(pfd, count, kSliceMs);
    if (r > 0) {
      if ((pfd[0].revents & POLLNVAL) != 0 || (pfd[1].revents & POLLNVAL) != 0) {
        guard.LinkEnded();
        const int which = (pfd[0].revents & POLLNVAL) != 0 ? rank : pumping_->rank;
        throw CollError("EPEERLOST", "the connection to rank " + std::to_string(which) + " failed");
      }
      // Readable, writable, hung up or reset (POLLERR): the next recv/send tells which. A reset
      // still lets recv return what arrived before it — the peer's abort notice, when it
      // closed with our probes unread (its close then resets the link) — and then the error.
      return;
    }
    guard.Check();
  }
}

TcpLinks::Outgoing::Outgoing(int socket, int to, const ByteSlice* slices, size_t count) : fd(socket), rank(to) {
  for (size_t i = 0; i < count && n < 4; ++i) {
    if (slices[i].size == 0) continue;
    iov[n].iov_base = const_cast<void*>(slices[i].data);
    iov[n].iov_len = slices[i].size;
    ++n;
  }
}

bool TcpLinks::WriteSome(Outgoing& out, WaitGuard& guard) {
  bool moved = false;
  while (!out.done()) {
    msghdr msg{};
    msg.msg_iov = out.iov + out.first;
    msg.msg_iovlen = out.n - out.first;
    const ssize_t sent = sendmsg(out.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return moved;
      if (errno == EINTR) continue;
      const int error = errno;
      guard.LinkEnded();
      // The peer ended the connection while this rank was still writing to it: what it sent
      // last, unread here, may be its abort notice (SendLastWords), kept for the caller.
      throw PeerClosed("lost the connection to rank " + std::to_string(out.rank) + ": " + ErrnoText(error), UnreadTail(out.fd));
    }
    moved = true;
    size_t left = static_cast<size_t>(sent);
    while (out.first < out.n && left >= out.iov[out.first].iov_len) left -= out.iov[out.first++].iov_len;
    if (out.first < out.n) {
      out.iov[out.first].iov_base = static_cast<char*>(out.iov[out.first].iov_base) + left;
      out.iov[out.first].iov_len -= left;
    }
  }
  return moved;
}

void TcpLinks::Send(int rank, const ByteSlice* slices, size_t count, WaitGuard& guard) {
  const int fd = FdOf(rank);
  const InsideMessage inside(*this, rank);
  if (!inside.entered()) throw PeerClosed("the links to rank " + std::to_string(rank) + " are closing after a failure", "");
  Outgoing out(fd, rank, slices, count);
  for (;;) {
    WriteSome(out, guard);
    if (out.done()) return;
    WaitFd(fd, POLLOUT, rank, guard);
  }
}

void TcpLinks::SendWhileReceiving(int rank, const ByteSlice* slices, size_t count, Borrowed receive, WaitGuard& guard) {
  const int fd = FdOf(rank);
  const InsideMessage inside(*this, rank);
  if (!inside.entered()) throw PeerClosed("the links to rank " + std::to_string(rank) + " are closing after a failure", "");
  Outgoing out(fd, rank, slices, count);
  WriteSome(out, guard);
  {
    // The reads push the send on while `receive` runs, and only then (a throw ends it).
    struct Pumping {
      Outgoing*& slot;
      ~Pumping() { slot = nullptr; }
    } pumping{pumping_ = &out};
    receive();
  }
  while (!out.done()) {
    if (!WriteSome(out, guard)) WaitFd(fd, POLLOUT, rank, guard);
  }
}

std::string TcpLinks::UnreadTail(int fd) {
  // Reads what the peer's stream still holds, without waiting and at most kMaxUnreadBytes (a
  // dead link's backlog is dropped anyway), keeping its last kTailBytes.
  constexpr size_t kMaxUnreadBytes = 64 << 20;
  std::string tail;
  char buf[64 * 1024];
  for (size_t total = 0; total < kMaxUnreadBytes;) {
    const ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r <= 0) break;
    total += static_cast<size_t>(r);
    tail.append(buf, static_cast<size_t>(r));
    if (tail.size() > kTailBytes) tail.erase(0, tail.size() - kTailBytes);
  }
  return tail;
}

void TcpLinks::ReadExact(int rank, void* dst, size_t n, WaitGuard& guard) {
  const int fd = FdOf(rank);
  char* out = static_cast<char*>(dst);
  uint32_t spins = read_spin_.attempts;
  using Clock = std::chrono::steady_clock;
  // Clock reads only where the spin is bounded in time or watched for a lost core.
  const bool timed = spins > 0 && (read_spin_.for_at_most.count() > 0 || read_spin_.contention != nullptr);
  Clock::time_point last{}, spin_until = Clock::time_point::max();
  if (timed) {
    last = Clock::now();
    if (read_spin_.for_at_most.count() > 0) spin_until = last + read_spin_.for_at_most;
    if (read_spin_.contention != nullptr && read_spin_.contention->Recent(last)) spins = 0;
  }
  while (n > 0) {
    ssize_t r = recv(fd, out, n, 0);
    if (r > 0) {
      out += r;
      n -= static_cast<size_t>(r);
      // The copy took its own time: gaps count from here.
      if (timed) last = Clock::now();
      continue;
    }
    if (r == 0) {
      guard.LinkEnded();
      const size_t got = static_cast<size_t>(out - static_cast<char*>(dst));
      const size_t keep = got < kTailBytes ? got : kTailBytes;
      throw PeerClosed("rank " + std::to_string(rank) + " closed its connection (it exited or failed) ", std::string(out - keep, keep));
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // Inside an exchange: the send goes on first whenever its socket has room.
      if (pumping_ != nullptr && !pumping_->done() && WriteSome(*pumping_, guard)) continue;
      if (spins > 0) {
        --spins;
        CpuRelax();
        if (timed) {
          const auto now = Clock::now();
          if (read_spin_.contention != nullptr && now - last > read_spin_.taken_after && read_spin_.contention->Sighted(now)) {
            spins = 0;
          } else if (now >= spin_until) {
            spins = 0;
          }
          last = now;
        }
        continue;
      }
      WaitFd(fd, POLLIN, rank, guard);
      continue;
    }
    if (errno == EINTR) continue;
    const int error = errno;
    guard.LinkEnded();
    throw CollError("EPEERLOST", "lost the connection to rank " + std::to_string(rank) + ": " + ErrnoText(error));
  }
}

void TcpLinks::TrySend(int rank, const void* data, size_t n) {
  auto it = fds_.find(rank);
  if (it == fds_.end() || InsideMessageTo(rank)) return;
  const char* p = static_cast<const char*>(data);
  ssize_t sent = ::send(it->second, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (sent <= 0) return;  // nothing went out: the stream is intact, the probe is just skipped
  // Part of it went out: the rest must follow or the stream would be corrupt.
  for (int tries = 0; static_cast<size_t>(sent) < n && tries < 100; ++tries) {
    pollfd pfd{it->second, POLLOUT, 0};
    poll(&pfd, 1, kSliceMs);
    ssize_t r = ::send(it->second, p + sent, n - static_cast<size_t>(sent), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) sent += r;
  }
  if (static_cast<size_t>(sent) < n) throw CollError("EPEERLOST", "rank " + std::to_string(rank) + " stopped reading its connection");
}

void TcpLinks::SendLastWords(const void* data, size_t n, int budget_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(budget_ms);
  struct Pending {
    int fd;
    size_t sent;
  };
  const int inside = BeginLastWords();
  std::vector<Pending> pending;
  for (const auto& [rank, fd] : fds_) {
    if (rank != inside) pending.push_back(Pending{fd, 0});
  }
  std::vector<pollfd> waiting;
  // Every link gets its turn at once; a full one is waited on beside the others, not before them.
  while (!pending.empty()) {
    for (size_t i = pending.size(); i-- > 0;) {
      Pending& p = pending[i];
      ssize_t r = ::send(p.fd, static_cast<const char*>(data) + p.sent, n - p.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r > 0) p.sent += static_cast<size_t>(r);
      const bool gone = r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
      if (gone || p.sent == n) {
        pending[i] = pending.back();
        pending.pop_back();
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (pending.empty() || left <= 0) return;
    waiting.clear();
    for (const Pending& p : pending) waiting.push_back(pollfd{p.fd, POLLOUT, 0});
    poll(waiting.data(), waiting.size(), static_cast<int>(left));
  }
}

void TcpLinks::ShutdownAll() {
  for (auto& [rank, fd] : fds_) shutdown(fd, SHUT_RDWR);
}

void TcpLinks::CloseAll() {
  for (auto& [rank, fd] : fds_) close(fd);
  fds_.clear();
  for (const Greeting& g : greeting_) close(g.fd);
  greeting_.clear();
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

}  // namespace topocoll
