//! An in-memory link with seeded loss, duplication, reordering, delay and corruption, for tests.
