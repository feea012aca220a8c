//! Helpers for the VM tests.
