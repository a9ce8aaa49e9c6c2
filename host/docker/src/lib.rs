//! Containers through the Docker Engine API, spoken by Docker itself and by Podman's
//! compatible socket, on this machine or on another one.
//!
//! Each sandbox is one container, created hardened from the [`Policy`], with
//! `sandlot-agent` as process 1 (see [`sandlot_container`], which does all the
//! work inside). This module only creates, starts, switches the network of and removes
//! containers. The agent gets to the container in one of two ways
//! ([`AgentDelivery`]):
//!
//! - **bind mount** (engines on this machine, the default for `unix://` endpoints):
//!   the agent executable and a per-sandbox socket directory are mounted read-only;
//!   the agent connects back over the socket. A run costs one socket round trip.
//! - **attach** (any engine, the default for `tcp://` endpoints): the agent is copied
//!   into a volume of the container before it starts and speaks over the container's
//!   attached standard input and output, so nothing depends on a host path.
//!
//! Either way, when the host process goes away the agent sees its stream close, stops
//! everything and exits, and the engine removes the container (`AutoRemove`).
//!
//! Every container carries the labels `sandlot=1`, `sandlot.sandbox` and
//! `sandlot.owner` (the host process and its start time); [`ContainerBackend::gc`]
//! removes those whose owner is gone, and opening the first sandbox does it too.
//!
//! [`Policy`]: sandlot_core::Policy

mod checks;
mod container;
mod egress;
pub mod images;
mod packages;
mod sandbox;
mod socket;
mod toolchain;

pub mod provider;
pub use provider::ContainerProvider;

mod backend;
mod engine;

pub use backend::{ContainerBackend, ContainerBackendBuilder, SandboxInfo};
pub use engine::{AgentDelivery, Engine, TlsFiles};
pub use images::{ImageInfo, Recipe};
