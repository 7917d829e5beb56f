#pragma once
/// \file
/// How servekit's non-template functions are compiled, as fmt's compiled mode and Boost.Beast's
/// separate compilation do it:
///
/// - by default, a header declares them and a library built once holds their definitions
///   (servekit::servekit for the engine's, servekit::server for the server tier's): a translation
///   unit that composes a `model<>` compiles its templates, not option validation, warmup or the
///   rate limiter again;
/// - with `SERVEKIT_HEADER_ONLY` defined, each such header includes its implementation files
///   (`impl/*.ipp`) and every definition is `inline`: nothing to build but the user's own code.
///
/// An implementation file defines each such function as `SERVEKIT_DECL` (`inline` in header-only
/// mode, nothing otherwise), and a source file under src/ compiles it once in the default mode.
/// The header declares it `SERVEKIT_DECL` too, so both modes see one declaration.

#if defined(SERVEKIT_HEADER_ONLY)
#define SERVEKIT_DECL inline
#else
#define SERVEKIT_DECL
#endif
