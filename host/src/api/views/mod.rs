//! The API's bodies (`spindle_views`, shared with the clients, which decode these same
//! types) and how the engine's records become them: each module here turns one area's
//! records into its views, with times as RFC 3339 text and values a view may not carry
//! withheld.

mod capacity;
mod hosts;
mod jobs;
mod kinds;
mod outbound;
mod queues;
mod submissions;
mod tenants;
mod tokens;

pub use capacity::capacity_view;
pub use hosts::host_view;
pub use jobs::job_view;
pub use kinds::{deploy_view, kind_view, spec_view, with_breakers};
pub use spindle_views::*;
pub use tokens::{created_token, token_view};
