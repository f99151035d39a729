pragma solidity ^0.8.13;

library LibBytes {
    use libbytes;
}