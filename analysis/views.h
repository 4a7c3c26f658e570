// The analysis SQL library: views and macros over the store's tables (docs/sql.md). They are
// installed into a store by InstallAnalysisViews: persistently after an ingest, or as TEMP
// objects in a read-only session, so `collscope sql` users and the C++ primitives read the same
// definitions.
#pragma once

#include "core/status.h"
#include "core/store.h"

namespace collscope {

// Creates (or replaces) every analysis view; `temporary` for read-only stores.
Status InstallAnalysisViews(Store& store, bool temporary);

}  // namespace collscope
