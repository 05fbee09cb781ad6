// Where an s3:// store's region, endpoint and credentials come from: the
// explicit S3Options first, then the environment, then the shared files
// (~/.aws/credentials, ~/.aws/config), as the AWS SDKs look (store.h).
#ifndef STOKER_STORE_S3_CONFIG_H_
#define STOKER_STORE_S3_CONFIG_H_

#include <functional>
#include <map>
#include <string>

#include "stoker/status.h"
#include "stoker/store.h"

namespace stoker {

struct S3Config {
  std::string region;
  std::string endpoint;       // empty: AWS
  std::string profile;
  std::string access_key_id;  // empty: unsigned requests
  std::string secret_access_key;
  std::string session_token;
  std::string credentials_from;  // where they were found, for messages ("AWS_ACCESS_KEY_ID", "profile 'x' in F")
};

// One section's keys of an INI file ("[name]" then "key = value" lines; '#'
// and ';' start comments).  Section names as written ("profile x" in the
// config file).
using IniFile = std::map<std::string, std::map<std::string, std::string>>;
IniFile ParseIni(const std::string& text);

// getenv (or a stand-in, for tests): nullptr or "" means unset.
using EnvLookup = std::function<const char*(const char*)>;

// Resolves every field.  Errors: a named profile (explicit or AWS_PROFILE)
// that neither file has; an access key without its secret.
Result<S3Config> ResolveS3Config(const S3Options& explicit_options, const EnvLookup& env);

}  // namespace stoker

#endif  // STOKER_STORE_S3_CONFIG_H_
