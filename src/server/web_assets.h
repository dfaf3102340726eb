// The dashboard's static files (web/), built into the server: CMake turns each file of web/ into
// a byte array of a generated source (cmake/embed_web.cmake), so that the binary serves them at
// /ui/ with nothing installed beside it and nothing fetched at run time.
#pragma once

#include <span>
#include <string_view>

namespace arbiter::server {

struct WebAsset {
  std::string_view path;  // relative to web/, e.g. "index.html", "app.js"
  std::string_view content_type;
  std::string_view body;
};

// Every file of web/, in the order CMake listed them.
std::span<const WebAsset> WebAssets();

}  // namespace arbiter::server
