//! Host-side bindings of the `spindle:job` world, generated from `wit/`.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "job-kind",
    imports: { default: async },
    exports: { default: async },
});
