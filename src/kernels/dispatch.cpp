// Placeholder translation unit; the kernels helper replaces this file with the dispatch table.
namespace minfer::kernels {}
