pragma solidity ^0.8.4;

library LibMap {
    use std::map;
    use std::io;
}