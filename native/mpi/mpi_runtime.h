// The process-wide MPI state of topocoll/mpi: initialisation, the thread level MPI gave, the
// hold every MPI call of the addon takes, finalisation, and error texts.
//
// PROTOCOL
//   MPI exists once per process, so this state does too: the main thread and any worker thread
//   that loads the addon share it.
//   - Every MPI call the addon makes after initialisation happens inside an MpiCall (RAII): a
//     shared hold of the lifetime lock, plus, when MPI gave less than MPI_THREAD_MULTIPLE, the
//     serial lock, which makes the addon's calls from different threads (JavaScript's, topocoll's
//     progress and watcher threads) one at a time, as MPI_THREAD_SERIALIZED requires.
//   - Finalize() takes the lifetime lock exclusively: it waits for calls in progress, runs the
//     cleanup functions (which free what the addon created: communicators, requests) and then
//     MPI_Finalize if this addon initialised MPI. Afterwards MpiCall::ok() is false and every
//     function fails without calling MPI ("MPI has been finalized").
//   - Lock order: lifetime → serial → any other lock of the addon. MpiCalls never nest on one
//     thread (a shared_mutex is not recursive; a nested shared hold can deadlock behind a
//     waiting Finalize).
//   - A process that exits from inside an MPI call (MPICH's MPI_Abort, and its fatal error
//     handler, end the process with exit(), which runs the atexit handler) does not finalize:
//     Finalize on a thread that holds an MpiCall returns at once instead of waiting for itself.
//   - A process leaving with a non-zero exit status (JavaScript's 'exit' event tells it through
//     SetExitStatus before the atexit handler runs) does not finalize either: MPI_Finalize
//     synchronises with every process of the job and, without fault tolerance, may never return
//     once one of them has died — the case in which topocoll's survivors fail and exit — while
//     a non-zero exit makes the launcher end the job anyway.
//   - When the addon initialised MPI, MPI_COMM_WORLD and MPI_COMM_SELF get MPI_ERRORS_RETURN
//     too: MPI raises the errors of calls bound to no communicator (MPI_Test of a request) on one
//     of them in some implementations (MPICH 4.0: MPI_COMM_WORLD), not on the request's.
#pragma once

#include <mpi.h>

#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>

namespace topocoll_mpi {

// MPI's thread levels, normalised (the MPI_THREAD_* constants are ordered but their values are
// the implementation's).
enum ThreadLevel : int { kThreadSingle = 0, kThreadFunneled = 1, kThreadSerialized = 2, kThreadMultiple = 3 };

// A failed MPI call (code: MPI's error code) or a refused one (code: one of the kErr* below).
class MpiError : public std::runtime_error {
 public:
  MpiError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// The addon's own failure codes. Negative, so that they never equal an MPI error code (those are
// MPI_SUCCESS = 0 and positive numbers, MPI_Add_error_code's included).
constexpr int kErrFinalized = -1;  // MPI has been finalized
constexpr int kErrNoMemory = -2;   // an allocation failed
constexpr int kErrArgument = -3;   // a peer out of range, a message over INT_MAX bytes
constexpr int kErrInternal = -4;   // an unexpected C++ exception

struct InitResult {
  ThreadLevel level;
  bool initialized_here;
};

// Initialises MPI with MPI_THREAD_MULTIPLE requested (and no argv) unless it is initialised
// already, in which case the addon joins it. Throws MpiError if MPI was finalized (it cannot be
// initialised again). Safe to call repeatedly and from several threads.
InitResult EnsureInitialized();

// The level MPI gave (kThreadSingle before initialisation).
ThreadLevel Level();

// Functions run by Finalize, in the order they were added, under the exclusive hold; they may
// call MPI directly but must not construct an MpiCall. At most a few (one per source file).
void AddCleanup(void (*cleanup)());

// Frees the addon's MPI objects (AddCleanup's functions) and, if this addon initialised MPI and
// MPI is not finalized yet, calls MPI_Finalize. Idempotent. Called from the main thread's Node
// environment cleanup hook, and from an atexit handler for the exits that skip that hook
// (process.exit()).
void Finalize();

// The status the process is exiting with (JavaScript's 'exit' event); non-zero: Finalize leaves
// MPI as it is (see PROTOCOL).
void SetExitStatus(int status);

// The hold every MPI call takes (see PROTOCOL).
class MpiCall {
 public:
  MpiCall();
  ~MpiCall();
  MpiCall(const MpiCall&) = delete;
  MpiCall& operator=(const MpiCall&) = delete;
  // False once MPI is finalized (by the addon or anyone else): make no MPI call then.
  bool ok() const { return ok_; }

 private:
  std::shared_lock<std::shared_mutex> lifetime_;
  std::unique_lock<std::mutex> serial_;
  bool ok_;
};

// The text of an MPI error code or of a kErr* code (MPI_Error_string for MPI's).
std::string ErrorText(int code);

// MPI_Error_class of an MPI error code (its own value for kErr* codes).
int ErrorClass(int code);

// Throws MpiError("<what>: <text>") unless rc is MPI_SUCCESS.
void Check(int rc, const char* what);

}  // namespace topocoll_mpi
