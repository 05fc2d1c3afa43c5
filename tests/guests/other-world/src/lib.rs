//! A well-formed component of the world `test:other/other`, not `spindle:job/job-kind`:
//! it exports `greet` and no `kind` interface, so the host must refuse it at upload.

#[allow(unsafe_code, reason = "generated ABI glue")]
mod bindings {
    wit_bindgen::generate!({
        path: "wit",
        world: "other",
    });
}

struct Other;

impl bindings::Guest for Other {
    fn greet() -> String {
        "hello from another world".to_owned()
    }
}

#[allow(unsafe_code, reason = "generated export glue")]
const _: () = {
    bindings::export!(Other with_types_in bindings);
};
