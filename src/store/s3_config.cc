#include "store/s3_config.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace stoker {

namespace {

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string Env(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v ? std::string(v) : std::string();
}

// The file's text, or "" when it does not exist.
Result<std::string> ReadIfThere(const std::string& path) {
  std::ifstream f(path);
  if (!f) {
    if (errno == ENOENT || errno == ENOTDIR) return std::string();
    return Status::IOError("reading " + path, errno);
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

IniFile ParseIni(const std::string& text) {
  IniFile out;
  std::string section;
  bool in_section = false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = Trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = Trim(line.substr(1, line.size() - 2));
      in_section = true;
      out[section];
      continue;
    }
    const size_t eq = line.find('=');
    if (!in_section || eq == std::string::npos) continue;  // (nested "s3 =" blocks: their lines start indented)
    out[section][Trim(line.substr(0, eq))] = Trim(line.substr(eq + 1));
  }
  return out;
}

Result<S3Config> ResolveS3Config(const S3Options& x, const EnvLookup& env) {
  S3Config c;
  const std::string home = Env(env, "HOME");
  std::string cred_path = Env(env, "AWS_SHARED_CREDENTIALS_FILE");
  if (cred_path.empty() && !home.empty()) cred_path = home + "/.aws/credentials";
  std::string conf_path = Env(env, "AWS_CONFIG_FILE");
  if (conf_path.empty() && !home.empty()) conf_path = home + "/.aws/config";
  IniFile creds, conf;
  if (!cred_path.empty()) {
    STOKER_ASSIGN_OR_RETURN(std::string t, ReadIfThere(cred_path));
    creds = ParseIni(t);
  }
  if (!conf_path.empty()) {
    STOKER_ASSIGN_OR_RETURN(std::string t, ReadIfThere(conf_path));
    conf = ParseIni(t);
  }
  c.profile = !x.profile.empty() ? x.profile : Env(env, "AWS_PROFILE");
  const bool profile_named = !c.profile.empty();
  if (!profile_named) c.profile = "default";
  // The config file names profiles "[profile x]", except "[default]".
  const std::string conf_section = c.profile == "default" ? "default" : "profile " + c.profile;
  const auto cred_it = creds.find(c.profile);
  const auto conf_it = conf.find(conf_section);
  if (profile_named && cred_it == creds.end() && conf_it == conf.end())
    return Status::InvalidArgument("AWS profile '" + c.profile + "' is in neither " +
                                   (cred_path.empty() ? "~/.aws/credentials" : cred_path) + " nor " +
                                   (conf_path.empty() ? "~/.aws/config" : conf_path) +
                                   " (AWS_PROFILE or the profile option names it)");
  auto from = [](const IniFile::const_iterator& it, const IniFile& f, const char* key) -> std::string {
    if (it == f.end()) return "";
    auto k = it->second.find(key);
    return k == it->second.end() ? "" : k->second;
  };

  if (!x.access_key_id.empty() || !x.secret_access_key.empty()) {
    c.access_key_id = x.access_key_id, c.secret_access_key = x.secret_access_key, c.session_token = x.session_token;
    c.credentials_from = "the store's options";
  } else if (!Env(env, "AWS_ACCESS_KEY_ID").empty() && x.profile.empty()) {
    // (as the AWS CLI: the environment's keys win over AWS_PROFILE's, a
    // profile named in the options wins over them)
    c.access_key_id = Env(env, "AWS_ACCESS_KEY_ID");
    c.secret_access_key = Env(env, "AWS_SECRET_ACCESS_KEY");
    c.session_token = Env(env, "AWS_SESSION_TOKEN");
    c.credentials_from = "AWS_ACCESS_KEY_ID";
  } else if (!from(cred_it, creds, "aws_access_key_id").empty()) {
    c.access_key_id = from(cred_it, creds, "aws_access_key_id");
    c.secret_access_key = from(cred_it, creds, "aws_secret_access_key");
    c.session_token = from(cred_it, creds, "aws_session_token");
    c.credentials_from = "profile '" + c.profile + "' in " + cred_path;
  } else if (!from(conf_it, conf, "aws_access_key_id").empty()) {
    c.access_key_id = from(conf_it, conf, "aws_access_key_id");
    c.secret_access_key = from(conf_it, conf, "aws_secret_access_key");
    c.session_token = from(conf_it, conf, "aws_session_token");
    c.credentials_from = "profile '" + c.profile + "' in " + conf_path;
  }
  if (!c.access_key_id.empty() && c.secret_access_key.empty())
    return Status::InvalidArgument("an AWS access key id from " + c.credentials_from +
                                   " without its secret access key (AWS_SECRET_ACCESS_KEY / aws_secret_access_key)");

  c.region = x.region;
  for (const char* v : {"AWS_REGION", "AWS_DEFAULT_REGION"})
    if (c.region.empty()) c.region = Env(env, v);
  if (c.region.empty()) c.region = from(conf_it, conf, "region");
  if (c.region.empty()) c.region = "us-east-1";

  c.endpoint = x.endpoint;
  for (const char* v : {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"})
    if (c.endpoint.empty()) c.endpoint = Env(env, v);
  if (c.endpoint.empty()) c.endpoint = from(conf_it, conf, "endpoint_url");
  while (!c.endpoint.empty() && c.endpoint.back() == '/') c.endpoint.pop_back();
  if (!c.endpoint.empty() && c.endpoint.rfind("http://", 0) != 0 && c.endpoint.rfind("https://", 0) != 0)
    return Status::InvalidArgument("S3 endpoint '" + c.endpoint + "' should start with http:// or https://");
  return c;
}

}  // namespace stoker
