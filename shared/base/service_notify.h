// The service manager's notify protocol (sd_notify(3)), spoken directly: a
// datagram of "KEY=VALUE" lines to the unix socket named by $NOTIFY_SOCKET (a
// path, or "@name" in the abstract namespace). systemd sets it for a
// Type=notify unit; anywhere else it is unset and every call does nothing.
//
// Written here rather than linked from libsystemd: the protocol is one
// sendmsg, libsystemd would be a build and run-time dependency of every
// daemon for it, and the daemons then run the same with or without systemd.
//
// Thread-safe: each call opens, sends and closes its own socket.
#pragma once

#include <string>
#include <string_view>

#include "shared/status.h"

namespace k3::base {

// Sends `state` ("READY=1\nSTATUS=serving", ...) to $NOTIFY_SOCKET. OK and
// nothing sent when the variable is unset or empty; an error when it names no
// usable socket (the caller logs it: a lost READY=1 is a failed start).
Status notify_service(std::string_view state);

// READY=1 with a STATUS line: the daemon's API serves.
Status notify_ready(std::string_view status);
// STATUS=...: what a starting (or running) daemon is doing.
Status notify_status(std::string_view status);
// EXTEND_TIMEOUT_USEC: systemd's start (or stop) timeout is at least
// `seconds` from now; with STATUS when `status` is not empty.
Status notify_extend_timeout(double seconds, std::string_view status = {});
// STOPPING=1: the daemon is shutting down.
Status notify_stopping();

}  // namespace k3::base
