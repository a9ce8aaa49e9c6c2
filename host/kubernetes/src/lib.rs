//! Sandboxes as pods of a Kubernetes cluster, through kube-rs.
//!
//! Each sandbox is one pod generated from the [`Policy`] (see
//! [`PodTemplate`] for what a user may add under it). An init container copies
//! `sandlot-agent` from its own small image into a memory volume; the sandbox
//! container runs it as process 1, and the host speaks to it over the pod's attach
//! stream (on 1.20 the websocket protocol `v4.channel.k8s.io`, which cannot close
//! standard input; the agent's protocol never needs to, and kube negotiates v5 first
//! on newer servers). From there on everything is the agent's, exactly as on Docker
//! ([`sandlot_container`]).
//!
//! Nothing waits forever: every API call has a deadline, every request to the agent
//! has one, and a pod whose agent stops answering is deleted. When the host goes
//! away the attach stream closes, the agent stops everything and exits, and the pod
//! ends; `activeDeadlineSeconds` is the backstop if even that fails. Every pod carries
//! the label `sandlot.dev/managed=true` and the host process that made it
//! (annotation `sandlot.dev/owner`); [`KubernetesBackend::gc`] deletes those whose
//! owner is gone.
//!
//! Networks: pods labelled `sandlot.dev/network=off` are cut off by a NetworkPolicy
//! sandlot keeps in the namespace. Only a cluster whose network plugin enforces
//! NetworkPolicy cuts anything: where none is found, the backend does not claim
//! [`Capability::NetworkControl`] and every run says that its network is not enforced.
//!
//! Tested against Kubernetes 1.20 (dockershim), the oldest server sandlot supports.

mod pod;
pub mod provider;
mod sandbox;

mod api;
mod backend;

pub use provider::KubernetesProvider;

pub use backend::{KubernetesBackend, KubernetesBackendBuilder, NetworkPolicies, PodInfo};
pub use pod::PodTemplate;
