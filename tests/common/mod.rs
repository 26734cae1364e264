#![allow(dead_code)]
pub mod mock;
pub mod node;
