//! `libuwebsockets-sys` links only its own archive; the libraries that archive needs (its
//! Makefile builds uSockets on libuv with OpenSSL, and uWebSockets is C++) are named here,
//! as link arguments: those come after every crate's libraries on the linker's command line,
//! so after that archive, which is what a static archive's dependencies need.

fn main() {
    for library in ["uv", "ssl", "crypto", "z", "stdc++"] {
        println!("cargo:rustc-link-arg=-l{library}");
    }
}
