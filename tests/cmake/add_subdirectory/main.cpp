#include <servekit/servekit.hpp>

static_assert(sizeof(servekit::status) > 0);

int main() { return 0; }
