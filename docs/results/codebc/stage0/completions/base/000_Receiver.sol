pragma solidity ^0.8.4;

abstract contract Receiver {
    enum Status {
        Success,
        Error,
    }
}