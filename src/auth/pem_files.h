// Checks of PEM files before a server uses them (TLS certificates, keys and
// CA bundles), so that a bad file stops the start -- or is refused by a
// reload -- with a message naming it, instead of failing every handshake.
//
// Thread-safety: stateless functions.
#pragma once

#include <string>

#include "core/status.h"

namespace inferd::auth {

// OK when `cert_file` holds at least one certificate, `key_file` a private
// key, and the key is the first certificate's. INVALID_ARGUMENT naming the
// file and what is wrong otherwise.
Status CheckCertificateAndKey(const std::string& cert_file, const std::string& key_file);
// OK when `ca_file` holds at least one certificate.
Status CheckCaFile(const std::string& ca_file);

}  // namespace inferd::auth
