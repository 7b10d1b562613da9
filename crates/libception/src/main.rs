//! `libception`: the Reception daemon and its CLI.
//!
//! Placeholder until issue #2 lands.

fn main() {
    eprintln!("libception: not implemented yet (issue #2)");
    std::process::exit(1);
}
