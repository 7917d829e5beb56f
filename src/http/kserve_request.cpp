// The KServe v2 request decoder, compiled once into servekit::server: decode_infer_request
// (http/kserve_request.hpp) and the infer_request_parser it drives
// (http/detail/infer_request_parser.hpp). See core/detail/linkage.hpp.

#include <servekit/http/detail/infer_request_parser.hpp>
#include <servekit/http/kserve_request.hpp>

#include <servekit/http/detail/impl/infer_request_parser_events.ipp>
#include <servekit/http/detail/impl/infer_request_parser_tensors.ipp>
#include <servekit/http/impl/kserve_request.ipp>
