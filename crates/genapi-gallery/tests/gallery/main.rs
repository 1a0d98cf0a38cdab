//! The gallery of an output folder, built from its results as a user's
//! batch leaves them: the page, its thumbnails, what it refuses to read, and
//! the page in a real browser.

mod browser;
mod long_texts;
mod page;
mod pages;

use genapi_test_common as common;
