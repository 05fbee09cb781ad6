// Whether a store's server runs on this machine: its URL's host is
// "localhost", a loopback address (127.0.0.0/8, ::1), or an address one of
// this machine's network interfaces has (getifaddrs).  A host name other
// than "localhost" is not looked up (a DNS query at open, for a guess): it
// counts as another machine.
//
// StreamingDataset keeps its fetchers off the server's cores where the two
// share a machine (core/cpu_affinity.h: CpusBesideServer).
#ifndef STOKER_STORE_SERVER_HOST_H_
#define STOKER_STORE_SERVER_HOST_H_

#include <string>

namespace stoker {

// `host` as a URL has it: a name, an IPv4 address, or an IPv6 address with
// or without its brackets.
bool HostIsThisMachine(const std::string& host);

// The host of `url` ("http://127.0.0.1:8080/data" -> "127.0.0.1"), or ""
// where libcurl cannot parse it.
std::string UrlHost(const std::string& url);

}  // namespace stoker

#endif  // STOKER_STORE_SERVER_HOST_H_
