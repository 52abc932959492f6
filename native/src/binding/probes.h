// Measurement probes and process helpers on the addon's exports: what `topocoll tune`, `topocoll
// bench`, `topocoll topo` and the launcher measure or set on this machine, beside the engine's
// binding (addon.cc) and outside it — none of them touches an Engine. Each is typed and
// documented in src/native.ts.
#pragma once

#include <napi.h>

namespace topocoll {

// Sets setThreadAffinity, pageNodes, crossCoreRates, combineRate and crossCoreLatencyNs on
// `exports`.
void ExportProbes(Napi::Env env, Napi::Object exports);

}  // namespace topocoll
