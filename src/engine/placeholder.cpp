// Placeholder so the layer library is never empty; removed once the layer has real sources.
namespace minfer {}
