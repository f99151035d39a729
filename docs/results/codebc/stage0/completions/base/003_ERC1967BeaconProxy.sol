pragma solidity ^0.8.4;

contract ERC1967BeaconProxy {
    const static defaultValue = 1;
}