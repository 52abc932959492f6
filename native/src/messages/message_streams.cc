#include "messages/message_streams.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/errors.h"
#include "base/wait.h"
#include "transport/tcp_links.h"

namespace topocoll {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kDiscardBytes = 256 * 1024;
// The longest single sleep of the loop towards a deadline.
constexpr int kMaxSleepMs = 1000;
// A driving waiter's passes: the first kSpinPasses pause the CPU between them, later ones
// yield it; a local source's stream is read every kStreamEvery-th pass (its channel every one).
constexpr uint32_t kSpinPasses = 64;
constexpr uint32_t kStreamEvery = 64;
constexpr uint32_t kClockEvery = 8;

int64_t NowNs() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

// The word a peer reads to learn that it may copy messages out of this process (CopyOutWorks).
const uint64_t kProbeWord = MessageStreams::kMessagesProbe;
// The loop's longest sleep while copy-outs of this rank wait: its safety net, should a receiver's
// Frame{kFrameDone} not come (it writes one only where it has this rank's stream).
constexpr int kCopyOutCheckMs = 1;
// How long the loop leaves the incoming streams to a waiter that drives them (Wait) after its
// last pass: back-to-back blocking calls keep it so, and the loop looks again within this.
constexpr std::chrono::microseconds kDrivenFor{1000};

}  // namespace

// A message read from a connection before any receive matched it (owned by the unexpected
// queue, or by the receive that claimed it while its body still streams in).
struct MessageStreams::Arrival {
  int source = -1;
  int32_t tag = 0;
  uint64_t length = 0;
  uint64_t got = 0;
  std::unique_ptr<uint8_t[]> data;
  MessageOpPtr claimed;  // a receive that took it before its body was complete
  std::string code;      // a copy-out that failed: its receive fails so
  std::string message;
};

// The reading side of a source's channel to this rank.
struct MessageStreams::ChannelIn {
  ShmChannel* channel = nullptr;  // once the source made it
  bool held = false;              // `header` read, its body still in the ring: a later seq than the next
  ChannelHeader header{};
};

struct MessageStreams::Conn {
  int fd = -1;
  int peer = -1;
  bool outgoing = false;
  bool connecting = false;
  bool ended = false;
  bool held = false;  // `frame` read: a message with a later seq than the next (ChannelIn's twin)
  // Read side: a frame header, then a body into `target` (matched), `arrival` (unexpected) or nowhere.
  Frame frame{};
  size_t frame_got = 0;
  bool in_body = false;
  uint64_t body_at = 0;
  MessageOpPtr target;
  std::shared_ptr<Arrival> arrival;
  // Greeting (accepted connections).
  Hello hello{};
  size_t hello_got = 0;
  Clock::time_point greeting_deadline;
  // Write side (outgoing): the hello, then the queued sends in order.
  Hello my_hello{};
  size_t hello_sent = 0;
  std::deque<MessageOpPtr> sends;
  uint64_t front_sent = 0;  // bytes of the front send's frame and body written
  Frame front_frame{};
};

MessageStreams::MessageStreams(Options options) : options_(std::move(options)) {
  const auto n = static_cast<size_t>(options_.size);
  out_.resize(n);
  in_.resize(n);
  gone_.resize(n);
  gone_evidence_.resize(n);
  sent_seq_.resize(n);
  next_seq_.resize(n);
  channel_in_.resize(n);
  copy_outs_.resize(n);
  copy_out_works_.resize(n);
  channel_out_.resize(n);
  discard_.resize(kDiscardBytes);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw CollError("EINVAL", "eventfd: " + ErrnoText(errno));
}

MessageStreams::~MessageStreams() {
  Close();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

int MessageStreams::Bind() {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw CollError("EINVAL", "socket: " + ErrnoText(errno));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(listen_fd_);
    listen_fd_ = -1;
    throw CollError("EINVAL", "cannot listen for messages: " + ErrnoText(err));
  }
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

void MessageStreams::Listen() {
  if (listen(listen_fd_, 1024) != 0) throw CollError("EINVAL", "cannot listen for messages: " + ErrnoText(errno));
}

void MessageStreams::Start(const std::string& token, std::vector<TcpPeer> peers) {
  token_ = token;
  peers_ = std::move(peers);
  thread_ = std::thread([this] { Loop(); });
}

void MessageStreams::AttachNode(MessageNode node) {
  std::lock_guard<std::mutex> lock(mutex_);
  node_ = std::move(node);
  channel_policy_.asymmetric = node_.asymmetric;
  if (node_.pool != nullptr) {
    const auto mine = static_cast<size_t>(node_.local_index[static_cast<size_t>(options_.rank)]);
    node_.controls[mine]->messages_probe.store(reinterpret_cast<uint64_t>(&kProbeWord), std::memory_order_relaxed);
  }
  for (size_t r = 0; r < node_.local_index.size() && r < channel_in_.size(); ++r) {
    if (node_.pool != nullptr && node_.local_index[r] >= 0 && static_cast<int>(r) != options_.rank) {
      channel_in_[r] = std::make_unique<ChannelIn>();
    }
  }
}

void MessageStreams::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

std::string MessageStreams::Gone(int peer, const std::string& why) { return "rank " + std::to_string(peer) + " is gone: " + why; }

std::string MessageStreams::Describe(int source, int32_t tag) const {
  const std::string from = source == kAnySource ? "any rank" : "rank " + std::to_string(source);
  const std::string with = tag == kAnyTag ? "any tag" : "tag " + std::to_string(tag);
  return from + " with " + with;
}

MessageOpPtr MessageStreams::NewOp(MessageOp::Kind kind, int peer, int32_t tag, uint8_t* data, uint64_t bytes, uint64_t notify_id) const {
  auto op = std::make_shared<MessageOp>();
  op->kind = kind;
  op->peer = peer;
  op->tag = tag;
  op->data = data;
  op->bytes = bytes;
  op->notify = notify_id != 0;
  op->id = notify_id;
  op->deadline = options_.timeout_ms > 0 ? Clock::now() + std::chrono::milliseconds(options_.timeout_ms) : Clock::time_point::max();
  return op;
}

MessageOpPtr MessageStreams::Send(int dest, int32_t tag, const uint8_t* data, uint64_t bytes, uint64_t notify_id) {
  // The op only reads `data` (a send's buffer stays the caller's).
  auto op = NewOp(MessageOp::Kind::kSend, dest, tag, const_cast<uint8_t*>(data), bytes, notify_id);
  std::lock_guard<std::mutex> lock(mutex_);
  Posted(*op);
  if (closed_) {
    Complete(op, "ECLOSED", "send: the communicator is closed");
  } else if (!gone_[static_cast<size_t>(dest)].empty()) {
    Complete(op, "EPEERLOST",
             "send to rank " + std::to_string(dest) + " with tag " + std::to_string(tag) + ": " + gone_[static_cast<size_t>(dest)]);
  } else {
    op->seq = sent_seq_[static_cast<size_t>(dest)]++;
    const ChannelSend how = SendThroughChannel(op, dest, tag, data, bytes, op->seq);
    ++(how == ChannelSend::kSent ? paths_.channel : how == ChannelSend::kCopyOut ? paths_.copy_out : paths_.stream);
    if (how != ChannelSend::kByStream) {
      if (how == ChannelSend::kSent) Complete(op);
      Nudge(dest);
      return op;
    }
    Conn& c = OutConn(dest);
    c.sends.push_back(op);
    // An idle, connected stream is written at once on this thread (the thread hand-off is most
    // of a small message's latency); what does not fit is left to the progress thread.
    if (Greeted(c) && c.sends.size() == 1) HandleWrite(c);
    if (!op->done) Wake();
  }
  return op;
}

MessageOpPtr MessageStreams::Recv(int source, int32_t tag, uint8_t* data, uint64_t capacity, bool allocate, uint64_t notify_id) {
  auto op = NewOp(MessageOp::Kind::kRecv, source, tag, data, capacity, notify_id);
  op->allocate = allocate;
  std::lock_guard<std::mutex> lock(mutex_);
  Posted(*op);
  if (closed_) {
    Complete(op, "ECLOSED", "receive: the communicator is closed");
    return op;
  }
  if (auto arrival = match_.TakeUnexpected(source, tag)) {
    Arrival& a = **arrival;
    if (a.got == a.length) {
      Deliver(a, op);
    } else {
      a.claimed = op;  // the progress thread delivers it once its body is in
    }
    return op;
  }
  if (source != kAnySource && !gone_[static_cast<size_t>(source)].empty()) {
    Complete(op, "EPEERLOST", "receive from " + Describe(source, tag) + ": " + gone_[static_cast<size_t>(source)]);
    return op;
  }
  match_.AddPosted(source, tag, op);
  // Watch a source this rank has no stream from, so that its end reaches this receive.
  bool connect = false;
  if (source != kAnySource && !in_[static_cast<size_t>(source)]) {
    const Conn& watch = OutConn(source);
    connect = watch.fd < 0 && !watch.ended;
  }
  // The loop needs waking only to open the connection or to keep an earlier deadline than it
  // sleeps towards: a wake-up per receive costs about as much as the message itself.
  if (connect || op->deadline < loop_wakes_at_) Wake();
  return op;
}

// An op that will be settled through on_complete needs the loop to read the incoming streams
// whatever the blocking waits do.
void MessageStreams::Posted(const MessageOp& op) {
  if (!op.notify) return;
  ++pending_notify_;
  if (loop_skips_inputs_) Wake();
}

MessageStreams::Paths MessageStreams::SentPaths() {
  std::lock_guard<std::mutex> lock(mutex_);
  return paths_;
}

void MessageStreams::Wait(const MessageOpPtr& op) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Only while no op waits for the loop to settle it: the loop then reads and writes the streams
  // as well, and a second thread on them only contends for the mutex.
  if (!op->done && options_.drive_us > 0 && pending_notify_ == 0) {
    // A copy-out moves nothing on this side while the receiver copies: its budget grows with
    // the message (at 1 GB/s, far below a copy's rate).
    const auto budget =
        std::chrono::microseconds(options_.drive_us + (op->kind == MessageOp::Kind::kSend ? static_cast<int64_t>(op->bytes / 1000) : 0));
    Clock::time_point until = Clock::now() + budget;
    for (uint32_t pass = 0;; ++pass) {
      const uint64_t before = moved_;
      // A local source's channel every pass, its stream (a system call) every kStreamEvery-th,
      // not the first: from such a source the stream carries only what the channel could not
      // (a full ring, or a copy-out the peers may not make).
      Drive(*op, pass % kStreamEvery == kStreamEvery - 1);
      const bool over = op->done || closed_;
      // The clock every kClockEvery-th pass, or when bytes moved: a pass is far shorter. (The
      // first pass always: a receive that finds its message there at once still drives.)
      if (moved_ != before || pass % kClockEvery == 0) {
        const Clock::time_point now = Clock::now();
        // The budget is the longest stretch without a byte moved: a large message keeps its
        // waiter driving while it streams.
        if (moved_ != before) until = now + budget;
        const bool reading = op->kind == MessageOp::Kind::kRecv;
        if (reading) driven_until_ = now + kDrivenFor;
        if (over) break;
        if (now >= until) {
          // Nobody drives any more: the loop reads the streams again, at once.
          if (reading) driven_until_ = Clock::time_point::min();
          if (reading && loop_skips_inputs_) Wake();
          break;
        }
      }
      if (over) break;
      // Between passes the core goes to whatever else may run on it (the peer, when ranks
      // outnumber cores) and the progress thread may take the mutex.
      lock.unlock();
      if (pass < kSpinPasses) {
        CpuRelax();
      } else {
        sched_yield();
      }
      // The progress thread holds the mutex only for non-blocking work: spinning for it beats
      // sleeping on it, whose wake-up costs what the message does.
      while (!lock.try_lock()) CpuRelax();
      if (op->done || pending_notify_ > 0) break;
    }
  }
  done_cv_.wait(lock, [&] { return op->done; });
}

// Every read and write of a stream happens under mutex_, on whichever thread holds it: the
// progress thread after poll(), or a waiter here. A stream not yet connected or greeted is the
// progress thread's alone (it alone opens and accepts connections).
void MessageStreams::Drive(const MessageOp& op, bool streams) {
  auto readable = [](const std::unique_ptr<Conn>& c) { return c && !c->ended && c->fd >= 0; };
  if (op.kind == MessageOp::Kind::kSend) {
    if (!copy_outs_[static_cast<size_t>(op.peer)].empty()) CheckCopyOuts(op.peer);
    Conn* c = out_[static_cast<size_t>(op.peer)].get();
    if (c != nullptr && Greeted(*c) && !c->sends.empty()) {
      HandleWrite(*c);
    }
    return;
  }
  if (op.peer != kAnySource) {
    ReadFrom(op.peer, streams || !channel_in_[static_cast<size_t>(op.peer)]);
    return;
  }
  for (size_t p = 0; p < in_.size() && !op.done; ++p)
    if (readable(in_[p]) || channel_in_[p]) ReadFrom(static_cast<int>(p), streams || !channel_in_[p]);
}

bool MessageStreams::Done(const MessageOpPtr& op) {
  std::lock_guard<std::mutex> lock(mutex_);
  return op->done;
}

void MessageStreams::Complete(const MessageOpPtr& op, std::string code, std::string message) {
  if (op->done) return;
  op->code = std::move(code);
  op->message = std::move(message);
  op->done = true;
  if (op->notify) --pending_notify_;
  done_cv_.notify_all();
  if (op->notify && options_.on_complete) options_.on_complete(op);
}

// A complete unexpected message into the receive that takes it.
void MessageStreams::Deliver(Arrival& a, const MessageOpPtr& op) {
  op->source = a.source;
  op->status_tag = a.tag;
  op->length = a.length;
  if (op->allocate) {
    op->owned = std::move(a.data);
    op->bytes = a.length;
    Complete(op);
    return;
  }
  const uint64_t n = std::min(a.length, op->bytes);
  if (n > 0) std::memcpy(op->data, a.data.get(), n);
  if (!a.code.empty()) {
    Complete(op, a.code, a.message);
    return;
  }
  CompleteReceive(op, a.source, a.tag, a.length, op->bytes);
}

void MessageStreams::CompleteReceive(const MessageOpPtr& op, int source, int32_t tag, uint64_t length, uint64_t capacity) {
  if (length > capacity) {
    Complete(op, "ETRUNCATE",
             "the message from rank " + std::to_string(source) + " with tag " + std::to_string(tag) + " has " + std::to_string(length) +
                 " bytes, more than the receive buffer's " + std::to_string(capacity));
    return;
  }
  Complete(op);
}

MessageOpPtr MessageStreams::Match(int peer, int32_t tag, uint64_t length, std::shared_ptr<Arrival>& arrival) {
  if (auto r = match_.TakePosted(peer, tag)) {
    MessageOpPtr op = *r;
    op->source = peer;
    op->status_tag = tag;
    op->length = length;
    if (op->allocate) {
      op->owned.reset(new uint8_t[length > 0 ? length : 1]);
      op->data = op->owned.get();
      op->bytes = length;
    }
    return op;
  }
  arrival = std::make_shared<Arrival>();
  arrival->source = peer;
  arrival->tag = tag;
  arrival->length = length;
  arrival->data.reset(new uint8_t[length > 0 ? length : 1]);
  return nullptr;
}

bool MessageStreams::Greeted(const Conn& c) { return c.fd >= 0 && !c.ended && !c.connecting && c.hello_sent == sizeof c.my_hello; }

MessageStreams::Conn& MessageStreams::OutConn(int peer) {
  auto& slot = out_[static_cast<size_t>(peer)];
  if (!slot) {
    slot = std::make_unique<Conn>();
    slot->peer = peer;
    slot->outgoing = true;
    std::memcpy(slot->my_hello.token, token_.data(), std::min(token_.size(), TcpLinks::kTokenBytes));
    slot->my_hello.rank = options_.rank;
    slot->my_hello.magic = kHelloMagic;
  }
  return *slot;
}

void MessageStreams::Connect(Conn& c) {
  const TcpPeer& p = peers_[static_cast<size_t>(c.peer)];
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(p.port));
  inet_pton(AF_INET, p.host.c_str(), &addr.sin_addr);
  c.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (c.fd < 0) {
    EndConn(c, Gone(c.peer, "socket: " + ErrnoText(errno)));
    return;
  }
  TuneStreamSocket(c.fd);
  if (connect(c.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    EndConn(c, Gone(c.peer, "its port refused the connection (" + ErrnoText(errno) + ")"));
    return;
  }
  c.connecting = true;
}

void MessageStreams::HandleWrite(Conn& c) {
  if (c.connecting) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      EndConn(c, Gone(c.peer, "its port refused the connection (" + ErrnoText(err) + ")"));
      return;
    }
    c.connecting = false;
  }
  while (c.hello_sent < sizeof c.my_hello) {
    const ssize_t n =
        ::send(c.fd, reinterpret_cast<const uint8_t*>(&c.my_hello) + c.hello_sent, sizeof c.my_hello - c.hello_sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      EndConn(c, Gone(c.peer, "its connection broke (" + ErrnoText(errno) + ")"));
      return;
    }
    c.hello_sent += static_cast<size_t>(n);
  }
  while (!c.sends.empty()) {
    const MessageOpPtr& op = c.sends.front();
    if (c.front_sent == 0) {
      c.front_frame = op->nudge ? Frame{kFrameNudge, 0, 0, 0} : Frame{kFrameMessage, op->tag, op->bytes, op->seq};
      // The time limit counts from when the send is first in line.
      if (options_.timeout_ms > 0) op->deadline = std::max(op->deadline, Clock::now() + std::chrono::milliseconds(options_.timeout_ms));
    }
    const uint64_t total = sizeof(Frame) + op->bytes;
    while (c.front_sent < total) {
      iovec iov[2];
      int count = 0;
      if (c.front_sent < sizeof(Frame)) {
        iov[count++] = {reinterpret_cast<uint8_t*>(&c.front_frame) + c.front_sent, sizeof(Frame) - c.front_sent};
        if (op->bytes > 0) iov[count++] = {op->data, op->bytes};
      } else {
        const uint64_t at = c.front_sent - sizeof(Frame);
        iov[count++] = {op->data + at, op->bytes - at};
      }
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = static_cast<size_t>(count);
      const ssize_t n = ::sendmsg(c.fd, &m, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        EndConn(c, Gone(c.peer, "its connection broke (" + ErrnoText(errno) + ")"));
        return;
      }
      c.front_sent += static_cast<uint64_t>(n);
      moved_ += static_cast<uint64_t>(n);
    }
    MessageOpPtr done = op;
    c.sends.pop_front();
    c.front_sent = 0;
    Complete(done);
  }
}

// Reads what has arrived on `c`; false once the connection ended.
bool MessageStreams::ReadFrames(Conn& c) {
  const auto p = static_cast<size_t>(c.peer);
  for (;;) {
    if (!c.in_body) {
      if (!c.held) {
        const ssize_t n = ::recv(c.fd, reinterpret_cast<uint8_t*>(&c.frame) + c.frame_got, sizeof(Frame) - c.frame_got, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          EndConn(c, Gone(c.peer, n == 0 ? "its process ended (the stream closed without a Bye)"
                                         : "its connection broke (" + ErrnoText(errno) + ")"));
          return false;
        }
        if (n < 0) return true;
        c.frame_got += static_cast<size_t>(n);
        moved_ += static_cast<uint64_t>(n);
        if (c.frame_got < sizeof(Frame)) continue;
        c.frame_got = 0;
        if (c.frame.kind == kFrameBye) {
          EndConn(c, "rank " + std::to_string(c.peer) + " closed the communicator");
          return false;
        }
        // A message went through the channel: ReadFrom reads it after this stream.
        if (c.frame.kind == kFrameNudge && !c.outgoing) continue;
        // Back on this rank's own stream: a receiver copied a message out of this rank.
        if (c.frame.kind == kFrameDone && c.outgoing) {
          CheckCopyOuts(c.peer);
          continue;
        }
        if (c.frame.kind != kFrameMessage || c.outgoing || c.frame.tag < 0) {
          EndConn(c, Gone(c.peer, "it sent a frame that is not a message"));
          return false;
        }
      }
      // The source's messages are matched in seq order, whichever path each took.
      c.held = c.frame.seq != next_seq_[p];
      if (c.held) return true;
      ++next_seq_[p];
      c.body_at = 0;
      c.arrival.reset();
      // An unexpected one is queued now: a receive may claim it while its body streams in.
      c.target = Match(c.peer, c.frame.tag, c.frame.length, c.arrival);
      if (c.arrival) match_.AddUnexpected(c.peer, c.frame.tag, c.arrival);
      c.in_body = true;
    }
    // The body: straight into the receive's buffer (the part beyond its capacity dropped), or
    // into the arrival's own.
    const uint64_t left = c.frame.length - c.body_at;
    if (left > 0) {
      uint8_t* dst = nullptr;
      uint64_t want = left;
      if (c.target) {
        if (c.body_at < c.target->bytes) {
          dst = c.target->data + c.body_at;
          want = std::min(left, c.target->bytes - c.body_at);
        } else {
          dst = discard_.data();
          want = std::min<uint64_t>(left, discard_.size());
        }
      } else {
        dst = c.arrival->data.get() + c.body_at;
      }
      const ssize_t n = ::recv(c.fd, dst, want, 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        EndConn(c,
                Gone(c.peer, n == 0 ? "its process ended in the middle of a message" : "its connection broke (" + ErrnoText(errno) + ")"));
        return false;
      }
      if (n < 0) return true;
      c.body_at += static_cast<uint64_t>(n);
      moved_ += static_cast<uint64_t>(n);
      if (c.arrival) c.arrival->got = c.body_at;
      if (c.body_at < c.frame.length) continue;
    }
    c.in_body = false;
    if (c.target) {
      MessageOpPtr op = std::move(c.target);
      CompleteReceive(op, op->source, op->status_tag, op->length, op->bytes);
    } else {
      std::shared_ptr<Arrival> a = std::move(c.arrival);
      if (a->claimed) {
        MessageOpPtr op = std::move(a->claimed);
        Deliver(*a, op);
      }
    }
  }
}

void MessageStreams::HandleRead(Conn& c) {
  if (c.outgoing) {
    // Only a Bye comes this way (or the end of the connection).
    ReadFrames(c);
    return;
  }
  ReadFrom(c.peer);
}

void MessageStreams::ReadFrom(int peer, bool stream) {
  const auto p = static_cast<size_t>(peer);
  for (;;) {
    const uint64_t before = next_seq_[p];
    Conn* c = in_[p].get();
    if (stream && c != nullptr && !c->ended && c->fd >= 0) ReadFrames(*c);
    ReadChannel(peer);
    // A path that held a later message may go on once the other delivered the one before it.
    if (next_seq_[p] == before) return;
  }
}

void MessageStreams::TakeArrived(ShmChannel& ch, void* dst, size_t n) {
  size_t at = 0;
  ch.ConsumeArrived(
      n,
      [&](const uint8_t* bytes, size_t k) {
        std::memcpy(static_cast<uint8_t*>(dst) + at, bytes, k);
        at += k;
      },
      channel_policy_);
  moved_ += n;
}

void MessageStreams::ReadChannels() {
  for (size_t p = 0; p < channel_in_.size(); ++p)
    if (channel_in_[p]) ReadFrom(static_cast<int>(p));
}

void MessageStreams::ReadChannel(int peer) {
  const auto p = static_cast<size_t>(peer);
  ChannelIn* in = channel_in_[p].get();
  if (in == nullptr) return;
  if (in->channel == nullptr) {
    in->channel = node_.pool->MessageIncoming(node_.local_index[p]);
    if (in->channel == nullptr) return;
  }
  ShmChannel& ch = *in->channel;
  for (;;) {
    if (!in->held) {
      if (!ch.Arrived()) return;
      // Written at once: the whole message (or a copy-out's descriptor) is in the ring.
      TakeArrived(ch, &in->header, sizeof in->header);
      in->held = true;
    }
    if (in->header.seq != next_seq_[p]) return;
    in->held = false;
    ++next_seq_[p];
    const uint64_t length = in->header.length;
    const int32_t tag = in->header.tag;
    std::shared_ptr<Arrival> arrival;
    const MessageOpPtr op = Match(peer, tag, length, arrival);
    uint8_t* dst = op ? op->data : arrival->data.get();
    const uint64_t room = op ? op->bytes : length;
    std::string error;
    uint64_t got = 0;
    if (in->header.kind == kCopyOut) {
      error = TakeCopyOut(peer, *in, dst, room);
    } else if (length > 0) {
      ch.ConsumeArrived(
          length,
          [&](const uint8_t* bytes, size_t n) {
            const uint64_t keep = got < room ? std::min<uint64_t>(n, room - got) : 0;
            if (keep > 0) std::memcpy(dst + got, bytes, keep);
            got += n;
          },
          channel_policy_);
      moved_ += length;
    }
    if (arrival) {
      // Whole already: it is queued with its body.
      arrival->got = length;
      if (!error.empty()) {
        arrival->code = "EPEERLOST";
        arrival->message = error;
      }
      match_.AddUnexpected(peer, tag, std::move(arrival));
    } else if (!error.empty()) {
      Complete(op, "EPEERLOST", "receive from rank " + std::to_string(peer) + ": " + error);
    } else {
      CompleteReceive(op, peer, tag, length, room);
    }
  }
}

MessageStreams::ChannelSend MessageStreams::SendThroughChannel(const MessageOpPtr& op, int dest, int32_t tag, const uint8_t* data,
                                                               uint64_t bytes, uint64_t seq) {
  if (node_.pool == nullptr || dest == options_.rank) return ChannelSend::kByStream;
  const auto d = static_cast<size_t>(dest);
  const int local = node_.local_index[d];
  if (local < 0) return ChannelSend::kByStream;
  if (channel_out_[d] == nullptr) channel_out_[d] = node_.pool->MessageOutgoing(local);
  ShmChannel* ch = channel_out_[d];
  if (ch == nullptr) return ChannelSend::kByStream;
  const ChannelHeader header{tag, kInline, bytes, seq};
  const ByteSlice slices[2] = {{&header, sizeof header}, {data, static_cast<size_t>(bytes)}};
  if (ch->TrySend(slices, bytes > 0 ? 2 : 1, channel_policy_)) return ChannelSend::kSent;
  // Too large to go at once (not just no room now): the receiver copies it out of this rank.
  const uint64_t whole = 8 + ((sizeof header + bytes + 7) & ~uint64_t{7});
  if (whole <= ch->capacity() / 2 || !CopyOutWorks(dest)) return ChannelSend::kByStream;
  const ChannelHeader described{tag, kCopyOut, bytes, seq};
  const CopyOut from{reinterpret_cast<uint64_t>(data), static_cast<int64_t>(getpid())};
  const uint64_t trailer = 0;
  const ByteSlice descriptor[3] = {{&described, sizeof described}, {&from, sizeof from}, {&trailer, sizeof trailer}};
  if (!ch->TrySend(descriptor, 3, channel_policy_)) return ChannelSend::kByStream;
  copy_outs_[d].emplace_back(op, ch->head());
  ++copy_outs_pending_;
  return ChannelSend::kCopyOut;
}

bool MessageStreams::CopyOutWorks(int dest) {
  int8_t& works = copy_out_works_[static_cast<size_t>(dest)];
  if (works == 0) {
    const RankControl* control = node_.controls[static_cast<size_t>(node_.local_index[static_cast<size_t>(dest)])];
    const int32_t pid = control->pid.load(std::memory_order_relaxed);
    const uint64_t at = control->messages_probe.load(std::memory_order_relaxed);
    uint64_t word = 0;
    iovec mine{&word, sizeof word};
    iovec theirs{reinterpret_cast<void*>(at), sizeof word};
    // Reading the peer stands for the peer reading this rank: the same ptrace rules (same user,
    // no Yama restriction, no seccomp filter) decide both ways.
    const bool read = pid > 0 && at != 0 && process_vm_readv(pid, &mine, 1, &theirs, 1, 0) == static_cast<ssize_t>(sizeof word);
    works = read && word == kMessagesProbe ? 1 : -1;
  }
  return works > 0;
}

void MessageStreams::CheckCopyOuts(int dest) {
  const auto d = static_cast<size_t>(dest);
  auto& pending = copy_outs_[d];
  while (!pending.empty() && channel_out_[d]->Consumed(pending.front().second)) {
    MessageOpPtr op = std::move(pending.front().first);
    pending.pop_front();
    --copy_outs_pending_;
    Complete(op);
  }
}

std::string MessageStreams::TakeCopyOut(int peer, ChannelIn& in, uint8_t* dst, uint64_t room) {
  ShmChannel& ch = *in.channel;
  CopyOut from{};
  TakeArrived(ch, &from, sizeof from);
  const uint64_t want = std::min(in.header.length, room);
  std::string error;
  for (uint64_t done = 0; done < want;) {
    iovec mine{dst + done, static_cast<size_t>(want - done)};
    iovec theirs{reinterpret_cast<void*>(from.address + done), static_cast<size_t>(want - done)};
    const ssize_t n = process_vm_readv(static_cast<pid_t>(from.pid), &mine, 1, &theirs, 1, 0);
    if (n <= 0) {
      error = "the message of rank " + std::to_string(peer) + " with tag " + std::to_string(in.header.tag) +
              " could not be copied out of its memory (process_vm_readv: " + ErrnoText(n < 0 ? errno : EIO) + ")";
      break;
    }
    done += static_cast<uint64_t>(n);
  }
  moved_ += want;
  // The trailer last: `tail` passing it tells the sender its buffer is free again.
  ch.ConsumeArrived(
      8, [](const uint8_t*, size_t) {}, channel_policy_);
  // The sender's progress thread needs the word only where nothing else looks: while its
  // waiters drive it looks at every copy-out each time it wakes (within 1 ms), and a waiting
  // sender sees `tail` itself.
  const RankControl* sender = node_.controls[static_cast<size_t>(node_.local_index[static_cast<size_t>(peer)])];
  const bool looking = NowNs() < sender->messages_unnudged_until.load(std::memory_order_relaxed);
  Conn* back = in_[static_cast<size_t>(peer)].get();
  if (!looking && back != nullptr && !back->ended && back->fd >= 0) {
    const Frame done{kFrameDone, 0, 0, 0};
    [[maybe_unused]] ssize_t n = ::send(back->fd, &done, sizeof done, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  return error;
}

void MessageStreams::Nudge(int dest) {
  // The message's publication before the load of the receiver's time (the pair's other half is
  // in PublishUnnudged and the loop's scan after it).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const RankControl* control = node_.controls[static_cast<size_t>(node_.local_index[static_cast<size_t>(dest)])];
  if (NowNs() < control->messages_unnudged_until.load(std::memory_order_relaxed)) return;
  Conn& c = OutConn(dest);
  // One nudge not yet written covers every message before it.
  if (!c.sends.empty() && c.sends.back()->nudge && (c.sends.size() > 1 || c.front_sent == 0)) return;
  auto op = NewOp(MessageOp::Kind::kSend, dest, 0, nullptr, 0, 0);
  op->nudge = true;
  op->deadline = Clock::time_point::max();  // nobody's: no time limit
  c.sends.push_back(op);
  if (Greeted(c) && c.sends.size() == 1) HandleWrite(c);
  if (!op->done) Wake();
}

void MessageStreams::PublishUnnudged(int64_t until) {
  if (node_.pool == nullptr) return;
  const auto mine = static_cast<size_t>(node_.local_index[static_cast<size_t>(options_.rank)]);
  node_.controls[mine]->messages_unnudged_until.store(until, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void MessageStreams::Greet(Conn& c) {
  while (c.hello_got < sizeof c.hello) {
    const ssize_t n = ::recv(c.fd, reinterpret_cast<uint8_t*>(&c.hello) + c.hello_got, sizeof c.hello - c.hello_got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      c.ended = true;
      return;
    }
    c.hello_got += static_cast<size_t>(n);
  }
  char token[TcpLinks::kTokenBytes] = {};
  std::memcpy(token, token_.data(), std::min(token_.size(), TcpLinks::kTokenBytes));
  const int r = c.hello.rank;
  if (c.hello.magic != kHelloMagic || std::memcmp(token, c.hello.token, sizeof token) != 0 || r < 0 || r >= options_.size ||
      in_[static_cast<size_t>(r)]) {
    c.ended = true;  // a stranger, or a second connection: dropped without effect
    return;
  }
  auto conn = std::make_unique<Conn>();
  conn->fd = c.fd;
  conn->peer = r;
  c.fd = -1;
  c.ended = true;
  in_[static_cast<size_t>(r)] = std::move(conn);
  // Anything already sent after the hello.
  ReadFrom(r);
}

void MessageStreams::DrainArrived() {
  if (listen_fd_ >= 0) AcceptAll();
  for (auto& c : greeting_)
    if (c && !c->ended && c->fd >= 0 && c->peer < 0) Greet(*c);
  for (auto& c : in_)
    if (c && !c->ended && c->fd >= 0) ReadFrom(c->peer);
  ReadChannels();
}

void MessageStreams::AcceptAll() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    TuneStreamSocket(fd);
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->greeting_deadline = Clock::now() + std::chrono::seconds(2);
    Greet(*c);
    greeting_.push_back(std::move(c));
  }
}

// The connection's end: what it carried is over; the peer is gone once no stream from it is left.
void MessageStreams::EndConn(Conn& c, const std::string& why) {
  if (c.fd >= 0) {
    ::close(c.fd);
    c.fd = -1;
  }
  c.ended = true;
  c.connecting = false;
  const auto p = static_cast<size_t>(c.peer);
  if (c.target) {
    Complete(c.target, "EPEERLOST",
             "receive from rank " + std::to_string(c.peer) + " with tag " + std::to_string(c.frame.tag) + ": rank " +
                 std::to_string(c.peer) + " is gone in the middle of the message: " + why);
    c.target.reset();
  }
  if (c.arrival) {
    // A message cut short is no message: it leaves the unexpected queue (or fails its taker).
    std::shared_ptr<Arrival> a = std::move(c.arrival);
    if (a->claimed) {
      Complete(a->claimed, "EPEERLOST",
               "receive from rank " + std::to_string(c.peer) + ": rank " + std::to_string(c.peer) +
                   " is gone in the middle of the message: " + why);
    } else {
      match_.DropUnexpected([&](const auto& u) { return u.message == a; });
    }
  }
  const std::string& reason = why;
  // What the peer wrote into its channel before its stream ended still counts.
  if (!c.outgoing) ReadChannel(c.peer);
  if (c.outgoing) {
    for (auto& op : c.sends)
      Complete(op, "EPEERLOST", "send to rank " + std::to_string(c.peer) + " with tag " + std::to_string(op->tag) + ": " + reason);
    c.sends.clear();
    // The peer's own stream to this rank may still hold messages: it decides.
    if (in_[p] && !in_[p]->ended) {
      gone_evidence_[p] = true;
      return;
    }
    // A stream it opened and this rank has not greeted yet comes first.
    AcceptAll();
    if (in_[p] && !in_[p]->ended) {
      gone_evidence_[p] = true;
      return;
    }
  }
  PeerGone(c.peer, reason);
}

void MessageStreams::PeerGone(int peer, const std::string& why) {
  const auto p = static_cast<size_t>(peer);
  if (gone_[p].empty()) gone_[p] = why;
  FailCopyOuts(peer, "EPEERLOST", "send to rank " + std::to_string(peer) + ": " + gone_[p]);
  if (out_[p] && !out_[p]->ended) {
    for (auto& op : out_[p]->sends)
      Complete(op, "EPEERLOST", "send to rank " + std::to_string(peer) + " with tag " + std::to_string(op->tag) + ": " + gone_[p]);
    out_[p]->sends.clear();
  }
  FailRecvsFrom(peer);
}

void MessageStreams::FailCopyOuts(int peer, const std::string& code, const std::string& why) {
  auto& pending = copy_outs_[static_cast<size_t>(peer)];
  for (auto& entry : pending) Complete(entry.first, code, why);
  copy_outs_pending_ -= static_cast<int>(pending.size());
  pending.clear();
}

void MessageStreams::FailRecvsFrom(int peer) {
  const auto p = static_cast<size_t>(peer);
  match_.DropPosted([&](const auto& posted) {
    if (posted.source != peer) return false;
    Complete(posted.recv, "EPEERLOST", "receive from " + Describe(peer, posted.tag) + ": " + gone_[p]);
    return true;
  });
}

void MessageStreams::Expire(Clock::time_point now) {
  match_.DropPosted([&](const auto& posted) {
    if (posted.recv->deadline > now) return false;
    Complete(posted.recv, "ETIMEDOUT",
             "no message from " + Describe(posted.source, posted.tag) + " arrived within " + std::to_string(options_.timeout_ms) +
                 " ms (timeouts.collectiveMs)");
    return true;
  });
  for (auto& c : out_) {
    if (!c || c->ended || c->sends.empty() || c->sends.front()->deadline > now) continue;
    const MessageOpPtr& op = c->sends.front();
    const std::string why = "rank " + std::to_string(c->peer) + " did not take the message with tag " + std::to_string(op->tag) +
                            " within " + std::to_string(options_.timeout_ms) + " ms (timeouts.collectiveMs)";
    for (auto& s : c->sends) Complete(s, "ETIMEDOUT", "send to rank " + std::to_string(c->peer) + ": " + why);
    c->sends.clear();
    if (c->fd >= 0) ::close(c->fd);
    c->fd = -1;
    c->ended = true;
    gone_[static_cast<size_t>(c->peer)] = why;
  }
  for (size_t p = 0; p < copy_outs_.size(); ++p) {
    if (copy_outs_[p].empty() || copy_outs_[p].front().first->deadline > now) continue;
    FailCopyOuts(static_cast<int>(p), "ETIMEDOUT",
                 "send to rank " + std::to_string(p) + ": it did not copy the message with tag " +
                     std::to_string(copy_outs_[p].front().first->tag) + " within " + std::to_string(options_.timeout_ms) +
                     " ms (timeouts.collectiveMs)");
  }
}

Clock::time_point MessageStreams::Deadline() const {
  Clock::time_point d = Clock::time_point::max();
  for (const auto& p : match_.posted()) d = std::min(d, p.recv->deadline);
  for (const auto& c : out_)
    if (c && !c->sends.empty()) d = std::min(d, c->sends.front()->deadline);
  for (const auto& c : greeting_) d = std::min(d, c->greeting_deadline);
  for (const auto& pending : copy_outs_)
    if (!pending.empty()) d = std::min(d, pending.front().first->deadline);
  return d;
}

void MessageStreams::Loop() {
  std::vector<pollfd> fds;
  std::vector<Conn*> conns;
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    // Connections to open.
    for (auto& c : out_)
      if (c && !c->ended && c->fd < 0) Connect(*c);
    fds.clear();
    conns.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    conns.push_back(nullptr);
    fds.push_back({listen_fd_, POLLIN, 0});
    conns.push_back(nullptr);
    const Clock::time_point now = Clock::now();
    // While blocking waits drive the incoming streams (and no op waits for the loop to settle
    // it), the loop stays off them: a wake-up of this thread for every message that arrives
    // would cost what the message does, and take the core from the waiter on a full machine.
    loop_skips_inputs_ = pending_notify_ == 0 && now < driven_until_;
    // Senders skip the nudge while this rank looks at its channels anyway: until the drive
    // lapses, when this loop wakes and looks again. The scan comes after the store (a fence
    // between): a message sent un-nudged before it is found now.
    PublishUnnudged(loop_skips_inputs_ ? std::chrono::duration_cast<std::chrono::nanoseconds>(driven_until_.time_since_epoch()).count()
                                       : 0);
    ReadChannels();
    if (copy_outs_pending_ > 0)
      for (size_t p = 0; p < copy_outs_.size(); ++p)
        if (!copy_outs_[p].empty()) CheckCopyOuts(static_cast<int>(p));
    for (auto* list : {&out_, &in_, &greeting_}) {
      if (list == &in_ && loop_skips_inputs_) continue;
      for (auto& c : *list) {
        if (!c || c->ended || c->fd < 0) continue;
        short events = POLLIN;
        if (c->outgoing && (c->connecting || c->hello_sent < sizeof c->my_hello || !c->sends.empty())) events |= POLLOUT;
        fds.push_back({c->fd, events, 0});
        conns.push_back(c.get());
      }
    }
    // The loop sleeps until a post, a connection or a byte wakes it, or towards the nearest
    // deadline, at most kMaxSleepMs: so a receive posted with a later deadline needs no wake-up.
    // Off the incoming streams it looks again when the waiters' drive lapses.
    Clock::time_point deadline = std::min(Deadline(), now + std::chrono::milliseconds(kMaxSleepMs));
    if (loop_skips_inputs_) deadline = std::min(deadline, driven_until_);
    if (copy_outs_pending_ > 0) deadline = std::min(deadline, now + std::chrono::milliseconds(kCopyOutCheckMs));
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    const int timeout = static_cast<int>(std::clamp<int64_t>(ms, 0, kMaxSleepMs));
    loop_wakes_at_ = now + std::chrono::milliseconds(timeout);
    lock.unlock();
    ::poll(fds.data(), fds.size(), timeout);
    lock.lock();
    loop_wakes_at_ = Clock::time_point::min();  // awake: it looks at every deadline before it sleeps again
    if (stopping_) break;
    if (fds[0].revents != 0) {
      uint64_t v;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &v, sizeof v);
    }
    if (fds[1].revents != 0) AcceptAll();
    for (size_t i = 2; i < fds.size(); ++i) {
      Conn* c = conns[i];
      if (c->ended || fds[i].revents == 0) continue;
      if (c->outgoing && (fds[i].revents & (POLLOUT | POLLERR | POLLHUP)) &&
          (c->connecting || c->hello_sent < sizeof c->my_hello || !c->sends.empty())) {
        HandleWrite(*c);
      }
      if (c->ended) continue;
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
        if (c->peer < 0) {
          Greet(*c);
        } else {
          HandleRead(*c);
        }
      }
    }
    // Greetings that ended or took too long.
    const Clock::time_point after = Clock::now();
    greeting_.erase(std::remove_if(greeting_.begin(), greeting_.end(),
                                   [&](std::unique_ptr<Conn>& c) {
                                     if (!c->ended && c->greeting_deadline > after) return false;
                                     if (c->fd >= 0) ::close(c->fd);
                                     return true;
                                   }),
                    greeting_.end());
    // A peer whose watch connection ended while its own stream still ran is gone once that ended too.
    for (size_t p = 0; p < in_.size(); ++p) {
      if (gone_evidence_[p] && (!in_[p] || in_[p]->ended)) {
        gone_evidence_[p] = false;
        PeerGone(static_cast<int>(p), gone_[p].empty() ? "rank " + std::to_string(p) + " is gone" : gone_[p]);
      }
    }
    // A peer gone through its own stream: receives from it that nothing matched end now.
    for (size_t p = 0; p < in_.size(); ++p)
      if (!gone_[p].empty()) FailRecvsFrom(static_cast<int>(p));
    Expire(after);
  }
}

std::vector<std::pair<int, uint64_t>> MessageStreams::Close() {
  std::vector<std::pair<int, uint64_t>> unreceived;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return unreceived;
    closed_ = true;
    stopping_ = true;
    Wake();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mutex_);
  DrainArrived();
  std::map<int, uint64_t> counts;
  for (const auto& u : match_.unexpected()) ++counts[u.source];
  unreceived.assign(counts.begin(), counts.end());
  for (const auto& p : match_.posted())
    Complete(p.recv, "ECLOSED", "receive from " + Describe(p.source, p.tag) + ": the communicator was closed");
  for (size_t p = 0; p < copy_outs_.size(); ++p)
    FailCopyOuts(static_cast<int>(p), "ECLOSED", "send to rank " + std::to_string(p) + ": the communicator was closed");
  match_.Clear();
  const Frame bye{kFrameBye, 0, 0, 0};
  for (auto* list : {&out_, &in_, &greeting_}) {
    for (auto& c : *list) {
      if (!c) continue;
      if (c->target) Complete(c->target, "ECLOSED", "receive: the communicator was closed");
      if (c->arrival && c->arrival->claimed) Complete(c->arrival->claimed, "ECLOSED", "receive: the communicator was closed");
      for (auto& op : c->sends) Complete(op, "ECLOSED", "send to rank " + std::to_string(c->peer) + ": the communicator was closed");
      // A Bye only where no frame is half written (else the peer sees the stream end: gone).
      if (c->fd >= 0 && !c->ended && c->peer >= 0 && !c->connecting && c->front_sent == 0 &&
          (!c->outgoing || c->hello_sent == sizeof c->my_hello)) {
        [[maybe_unused]] ssize_t n = ::send(c->fd, &bye, sizeof bye, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      c->sends.clear();
      if (c->fd >= 0) ::close(c->fd);
      c->fd = -1;
      c->ended = true;
    }
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
  return unreceived;
}

}  // namespace topocoll
