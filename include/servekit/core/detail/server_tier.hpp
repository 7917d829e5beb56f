#pragma once
/// \file
/// How the server tier (config reading and writing, the KServe codec and HTTP server, the model
/// repository's non-template parts) is compiled, as Boost.Beast's separate compilation and fmt's
/// compiled mode do it:
///
/// - by default, its headers declare the functions and `servekit::server` (a library, built once)
///   holds their definitions: every translation unit that includes the server tier compiles
///   declarations only;
/// - with `SERVEKIT_HEADER_ONLY` defined, each such header includes its implementation files
///   (`impl/*.ipp`) and every definition is `inline`: nothing to link but servekit::servekit.
///
/// An implementation file defines each non-template function as `SERVEKIT_SERVER_DECL`
/// (`inline` in header-only mode, nothing otherwise) and is compiled once by a source file under
/// src/ in the default mode.

#if defined(SERVEKIT_HEADER_ONLY)
#define SERVEKIT_SERVER_DECL inline
#else
#define SERVEKIT_SERVER_DECL
#endif
