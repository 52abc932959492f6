// See mpi_runtime.h for the protocol.
#include "mpi_runtime.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <vector>

namespace topocoll_mpi {

namespace {

struct Runtime {
  // Shared by MPI calls, exclusive for initialisation and finalisation.
  std::shared_mutex lifetime;
  // Held around every MPI call when MPI gave less than MPI_THREAD_MULTIPLE.
  std::mutex serial;
  // Written under the exclusive hold, read under either hold.
  bool initialized = false;  // by this addon or by someone before it
  bool initialized_here = false;
  bool finalized = false;  // by Finalize (MpiCall also asks MPI_Finalized)
  bool atexit_registered = false;
  std::vector<void (*)()> cleanups;
  // Read without the lock by MpiCall (to choose whether to take `serial`): set once, under the
  // exclusive hold, before any MpiCall can see `initialized`.
  std::atomic<int> level{kThreadSingle};
  // Set by JavaScript's 'exit' event, read by Finalize on the exiting thread.
  std::atomic<int> exit_status{0};
};

// Leaked on purpose: the atexit handler and threads of topocoll still running while the process
// exits must find the locks intact, so they are never destroyed.
Runtime& R() {
  static Runtime* runtime = new Runtime();
  return *runtime;
}

ThreadLevel Normalise(int provided) {
  if (provided >= MPI_THREAD_MULTIPLE) return kThreadMultiple;
  if (provided >= MPI_THREAD_SERIALIZED) return kThreadSerialized;
  if (provided >= MPI_THREAD_FUNNELED) return kThreadFunneled;
  return kThreadSingle;
}

// Node loads an addon with RTLD_LOCAL, so libmpi (a dependency of this .node) is loaded local
// too, and Open MPI's plugins, which it dlopens itself and which expect libmpi's and
// libopen-pal's symbols to be global, may fail to load. Reopening libmpi with RTLD_GLOBAL
// (RTLD_NOLOAD: only if already loaded) makes them global; mpi4py does the same. The handle is
// never closed: MPI cannot be unloaded.
void PromoteLibmpi() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) != 0 && info.dli_fname != nullptr) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  }
}

void FinalizeAtExit() { Finalize(); }

// How many MpiCalls this thread holds (0 or 1: they never nest).
thread_local int calls_on_this_thread = 0;

}  // namespace

InitResult EnsureInitialized() {
  Runtime& r = R();
  std::unique_lock<std::shared_mutex> lock(r.lifetime);
  if (r.finalized) throw MpiError(kErrFinalized, "MPI has been finalized; it cannot be initialised again in this process");
  if (!r.initialized) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized) throw MpiError(kErrFinalized, "MPI has been finalized; it cannot be initialised again in this process");
    int provided = MPI_THREAD_SINGLE;
    if (!initialized) {
      PromoteLibmpi();
      // No argv: Node's arguments are not MPI's. Open MPI and MPICH take their settings from the
      // environment mpirun sets. Errors during initialisation abort the process (MPI's default:
      // no error handler can be set before MPI exists).
      Check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
      r.initialized_here = true;
      // MPICH 4.0 raises the errors of MPI_Test and the like (calls bound to no communicator)
      // on MPI_COMM_WORLD, MPI-4 on MPI_COMM_SELF, and their default handler aborts the job: a
      // receive of a message longer than its buffer would end the job instead of failing. The
      // addon's own communicators return errors; these two do too when the addon made MPI (an
      // application that initialised MPI itself keeps its handlers).
      Check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler(MPI_COMM_WORLD)");
      Check(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler(MPI_COMM_SELF)");
    } else {
      Check(MPI_Query_thread(&provided), "MPI_Query_thread");
    }
    r.level.store(Normalise(provided));
    r.initialized = true;
    if (r.initialized_here && !r.atexit_registered) {
      r.atexit_registered = true;
      std::atexit(FinalizeAtExit);
    }
  }
  return InitResult{static_cast<ThreadLevel>(r.level.load()), r.initialized_here};
}

ThreadLevel Level() { return static_cast<ThreadLevel>(R().level.load()); }

void AddCleanup(void (*cleanup)()) {
  Runtime& r = R();
  std::unique_lock<std::shared_mutex> lock(r.lifetime);
  for (auto* c : r.cleanups)
    if (c == cleanup) return;
  r.cleanups.push_back(cleanup);
}

void Finalize() {
  // exit() from inside an MPI call on this thread (MPICH's MPI_Abort and fatal errors): the
  // exclusive hold would wait for this thread's own shared one, and MPI is ending the process.
  if (calls_on_this_thread > 0) return;
  Runtime& r = R();
  std::unique_lock<std::shared_mutex> lock(r.lifetime);
  if (!r.initialized || r.finalized) return;
  r.finalized = true;
  int finalized = 0;
  MPI_Finalized(&finalized);
  // Someone else finalized MPI already: the addon's objects died with it, and calling MPI
  // now is erroneous. The cleanups run only while MPI is alive.
  if (finalized) return;
  if (r.exit_status.load() != 0) return;
  for (auto* cleanup : r.cleanups) cleanup();
  if (r.initialized_here) MPI_Finalize();
}

void SetExitStatus(int status) { R().exit_status.store(status); }

MpiCall::MpiCall() : lifetime_(R().lifetime) {
  Runtime& r = R();
  ok_ = r.initialized && !r.finalized;
  if (ok_) {
    int finalized = 0;
    MPI_Finalized(&finalized);  // thread-safe at any time, by the standard
    ok_ = !finalized;
  }
  if (ok_ && r.level.load() < kThreadMultiple) serial_ = std::unique_lock<std::mutex>(r.serial);
  ++calls_on_this_thread;
}

MpiCall::~MpiCall() { --calls_on_this_thread; }

std::string ErrorText(int code) {
  switch (code) {
    case MPI_SUCCESS: return "success";
    case kErrFinalized: return "MPI has been finalized";
    case kErrNoMemory: return "out of memory";
    case kErrArgument: return "invalid argument (a peer outside the communicator, or a message over 2^31 - 1 bytes)";
    case kErrInternal: return "internal error of topocoll/mpi";
    default: break;
  }
  if (code > 0) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      char text[MPI_MAX_ERROR_STRING + 1] = {0};
      int length = 0;
      if (MPI_Error_string(code, text, &length) == MPI_SUCCESS && length > 0) return std::string(text, static_cast<size_t>(length));
    }
  }
  return "MPI error " + std::to_string(code);
}

int ErrorClass(int code) {
  if (code <= 0) return code;
  int cls = code;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && MPI_Error_class(code, &cls) != MPI_SUCCESS) cls = code;
  return cls;
}

void Check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw MpiError(rc, std::string(what) + ": " + ErrorText(rc));
}

}  // namespace topocoll_mpi
