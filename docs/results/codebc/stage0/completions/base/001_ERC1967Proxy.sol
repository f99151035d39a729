pragma solidity ^0.8.4;

contract ERC1967Proxy {
    enum ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType;
    ERC1967ProxyType