// Errors raised while executing collectives. The code is one of topocoll's stable error codes
// (EINVAL, EMISMATCH, ETIMEDOUT, EPEERLOST, ECLOSED); the TypeScript wrapper turns it into a
// TopocollError.
#pragma once

#include <stdexcept>
#include <string>

namespace topocoll {

class CollError : public std::runtime_error {
 public:
  CollError(std::string code, const std::string& message) : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

// A peer's end of a TCP link closed in the middle of a read. `tail` holds the last bytes that
// arrived before the end (up to 32): a failing rank sends an abort notice just before it shuts
// its links, and a reader in the middle of a message body reads that notice as body bytes.
class PeerClosed : public CollError {
 public:
  PeerClosed(const std::string& message, std::string tail) : CollError("EPEERLOST", message), tail_(std::move(tail)) {}
  const std::string& tail() const { return tail_; }

 private:
  std::string tail_;
};

// errno as text, for system-call failures.
std::string ErrnoText(int err);

}  // namespace topocoll
