// HostIsThisMachine and UrlHost (server_host.h).
#include "store/server_host.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <strings.h>

#include <cstring>

namespace stoker {

bool HostIsThisMachine(const std::string& host) {
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (strcasecmp(h.c_str(), "localhost") == 0) return true;
  in_addr v4{};
  in6_addr v6{};
  const bool is_v4 = inet_pton(AF_INET, h.c_str(), &v4) == 1;
  const bool is_v6 = !is_v4 && inet_pton(AF_INET6, h.c_str(), &v6) == 1;
  if (!is_v4 && !is_v6) return false;  // a name: not looked up
  if (is_v4 && (ntohl(v4.s_addr) >> 24) == 127) return true;
  if (is_v6 && IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return false;
  bool mine = false;
  for (const ifaddrs* a = all; a && !mine; a = a->ifa_next) {
    if (!a->ifa_addr) continue;
    if (is_v4 && a->ifa_addr->sa_family == AF_INET)
      mine = std::memcmp(&reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, &v4, sizeof v4) == 0;
    else if (is_v6 && a->ifa_addr->sa_family == AF_INET6)
      mine = std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr, &v6, sizeof v6) == 0;
  }
  freeifaddrs(all);
  return mine;
}

std::string UrlHost(const std::string& url) {
  CURLU* u = curl_url();
  if (!u) return "";
  std::string out;
  char* host = nullptr;
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK)
    out = host;
  curl_free(host);
  curl_url_cleanup(u);
  return out;
}

}  // namespace stoker
