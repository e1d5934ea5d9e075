#include "blas_threads.h"

#include <dlfcn.h>

namespace smol::engine {

bool limitBlasToOneThread()
{
    // Debian's libtorch links libblas.so.3, an alternative that OpenBLAS
    // (libopenblas0-pthread) may provide; look its control up at run time.
    using SetThreads = void (*)(int);
    static const bool done = [] {
        auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
        if (set)
            set(1);
        return set != nullptr;
    }();
    return done;
}

} // namespace smol::engine
