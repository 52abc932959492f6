// Errors raised while executing collectives. The code is one of topocoll's stable error codes
// (EINVAL, EMISMATCH, ETIMEDOUT, EPEERLOST, ECLOSED); the TypeScript wrapper turns it into a
// TopocollError.
#pragma once

#include <stdexcept>
#include <string>

namespace topocoll {

class CollError : public std::runtime_error {
 public:
  CollError(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

// errno as text, for system-call failures.
std::string ErrnoText(int err);

}  // namespace topocoll
