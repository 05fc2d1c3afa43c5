//! Host-side bindings of the `spindle:job` worlds, generated from `wit/`: the current
//! contract (0.2.0) and the frozen 0.1.0 one, which components built before 0.2.0
//! target and which the host keeps running unchanged.

/// `spindle:job@0.1.0`, frozen in `wit/v0.1.0/`.
pub(crate) mod v1 {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.1.0",
        world: "job-kind",
        imports: { default: async },
        exports: { default: async },
    });
}

/// `spindle:job@0.2.0`. Its `wasi:http` imports are wasmtime-wasi-http's, linked on
/// their own; only Spindle's interfaces are generated here.
pub(crate) mod v2 {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "job-kind",
        imports: { default: async },
        exports: { default: async },
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
        },
    });
}
