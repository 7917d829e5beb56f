// The generate request decoder, compiled once into servekit::server: decode_generate_request
// (http/generate_codec.hpp), which drives the KServe request decoder's parser
// (http/detail/infer_request_parser.hpp, compiled by kserve_request.cpp). See
// core/detail/linkage.hpp.

#include <servekit/http/generate_codec.hpp>

#include <servekit/http/impl/generate_request.ipp>
