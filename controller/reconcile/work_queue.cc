// Implemented by the work queue work in progress.
