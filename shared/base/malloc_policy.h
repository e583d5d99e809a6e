// The daemons' malloc policy: buffers up to 32 MiB come from the heap and
// freed memory stays with the process (up to 1 GiB at the heap's top), so the
// per-step buffers of a long prompt's units (a KDA layer's rows, an FFN's
// gate and up rows: 3 to 24 MiB, allocated and freed every unit) are reused
// instead of being unmapped and faulted in and zeroed again by the kernel
// each time (glibc's defaults unmap above a threshold that starts at 128 KiB
// and trims a heap top of twice it; page faults were 7 % of a 2,048-token
// chunk's samples on a VM, perf cpu-clock).
#pragma once

namespace k3::base {

// Sets the policy (mallopt); call once at the start of main().
void keep_freed_memory_for_reuse();

}  // namespace k3::base
