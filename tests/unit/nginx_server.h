// A real nginx on 127.0.0.1 serving a directory, for the HTTP client's
// tests: started by the test (a free port), stopped, or killed mid-way.
// Where nginx is not installed the tests that need it are skipped
// (scripts/run.sh installs it).  The same layout as tests/python/nginx.py:
// /slow/ is rate-limited, /moved/x redirects to /x.
#ifndef STOKER_TESTS_NGINX_SERVER_H_
#define STOKER_TESTS_NGINX_SERVER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace stoker::testing {

class NginxServer {
 public:
  static bool Installed() { return access(kBinary, X_OK) == 0; }

  NginxServer(const std::string& workdir, const std::string& root, const std::string& slow_rate = "1m")
      : dir_(workdir), port_(FreePort()) {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/nginx.conf")
        << "daemon off; master_process off; worker_processes 1;\n"
        << "pid " << dir_ << "/nginx.pid; error_log " << dir_ << "/error.log warn;\n"
        << "events { worker_connections 64; }\n"
        << "http { access_log off; client_body_temp_path " << dir_ << "/body; proxy_temp_path " << dir_
        << "/proxy; fastcgi_temp_path " << dir_ << "/fcgi; uwsgi_temp_path " << dir_ << "/uwsgi; scgi_temp_path "
        << dir_ << "/scgi;\n"
        << "  server { listen 127.0.0.1:" << port_ << "; root " << root << ";\n"
        << "    location /slow/ { alias " << root << "/; limit_rate " << slow_rate << "; }\n"
        << "    location /moved/ { rewrite ^/moved/(.*)$ /$1 redirect; }\n  }\n}\n";
  }
  ~NginxServer() { Stop(SIGKILL); }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // True once it accepts connections (within 10 s).
  bool Start() {
    pid_ = fork();
    if (pid_ == 0) {
      setsid();
      execl(kBinary, kBinary, "-c", (dir_ + "/nginx.conf").c_str(), "-p", dir_.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      if (Accepts()) return true;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return pid_ = 0, false;
      usleep(50000);
    }
    return false;
  }

  void Stop(int sig = SIGTERM) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

 private:
  static constexpr const char* kBinary = "/usr/sbin/nginx";

  static int FreePort() {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    close(s);
    return ntohs(a.sin_port);
  }

  bool Accepts() const {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool ok = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(s);
    return ok;
  }

  std::string dir_;
  int port_;
  pid_t pid_ = 0;
};

}  // namespace stoker::testing

#endif  // STOKER_TESTS_NGINX_SERVER_H_
